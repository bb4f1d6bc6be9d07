package budgettest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

// The Sequential check's long runs find the float throttle, which rapid's
// short sequences pass, and show a shrunk run that ends at the answer. A
// Remote subject's runs are as long, though each of its calls is a round
// trip: runs a quarter as long missed this drift under -race (the first
// run finds it at its 37,701st operation).
func TestSequentialLongRunsFindFloatDrift(t *testing.T) {
	t.Parallel()
	m := model.Throttle{Max: 10_000, Ratio: 100}
	for _, remote := range []bool{false, true} {
		err := budgettest.VerifyCheck(t, budgettest.Subject[model.ThrottleState]{Name: "float throttle", Model: m, Remote: remote,
			New: func(*testing.T, budget.Clock) budget.Budget { return budgettest.NewFloatThrottle() }}, budgettest.CheckSequential)
		var f *budgettest.Failure
		if !errors.As(err, &f) {
			t.Fatalf("Remote %v: VerifyCheck = %v, want a Failure", remote, err)
		}
		for _, want := range []string{"every answer equals the model's", "long run", "of 100000 operations", "= granted, want denied", "shrunk from"} {
			if !strings.Contains(f.Error(), want) {
				t.Errorf("Remote %v: the failure lacks %q:\n%v", remote, want, f)
			}
		}
		t.Log(f)
	}
}

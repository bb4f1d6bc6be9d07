package budgettest_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

// floatThrottle is gRFC A6's throttle with its count in float64 tokens, as
// grpc-go keeps it: a success adds 0.1, which no float64 holds exactly.
// Its answers part from the model's milli-tokens only after a long run
// (the shortest is 126 calls), where a drain, deposits at a low count and
// a climb leave it a hair above half when the model is at half exactly.
type floatThrottle struct {
	mu     sync.Mutex
	tokens float64
}

func (t *floatThrottle) Request() {}
func (t *floatThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = max(t.tokens-1, 0)
	return t.tokens > 5
}
func (t *floatThrottle) Success(budget.Kind) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = min(t.tokens+0.1, 10)
}

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
			New: func(*testing.T, budget.Clock) budget.Budget { return &floatThrottle{tokens: 10} }}, budgettest.CheckSequential)
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

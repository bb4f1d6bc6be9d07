package budgettest_test

import (
	"errors"
	"flag"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/model"
)

// Under -short the exhaustive stage runs whole: a bucket whose Retry
// checks the balance and withdraws without its lock, which a search of
// the schedules finds on every run, is still caught by the Linearizable
// check, in the controlled child that -short reaches too.
func TestShortKeepsTheExhaustiveStage(t *testing.T) {
	skipUnderRace(t)
	if !testing.Short() {
		prev := flag.Lookup("test.short").Value.String()
		if err := flag.Set("test.short", "true"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { flag.Set("test.short", prev) })
	}
	m := model.AWS()
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{Name: "MissingLock", Model: m,
		New: func(*testing.T, budget.Clock) budget.Budget { return mutants.NewMissingLock(m) }}, budgettest.CheckLinearizable)
	var f *budgettest.Failure
	if !errors.As(err, &f) || f.Rule != "every concurrent history has an order, consistent with real time, that the model accepts" {
		t.Fatalf("VerifyCheck(MissingLock, Linearizable) under -short = %v, want a linearizability violation", err)
	}
}

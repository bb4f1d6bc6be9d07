package linearizability_test

import (
	"context"
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

// Search finds a budget that overfills on a refund, explains the violation
// with a minimized scenario, and saves it as a fixture that fails again.
func TestSearchFindsAndExplainsAViolation(t *testing.T) {
	m := smallBucket
	f, err := linearizability.Search(t, linearizability.Target[model.TokenBucketState]{
		Name: "UnclampedRefund", Model: m, Scenarios: 5,
		New: func(*testing.T, budget.Clock) budget.Budget { return mutants.NewUnclampedRefund(m) },
	})
	if err != nil || f == nil || f.Verdict != linearizability.Violation {
		t.Fatalf("Search = %+v, %v; want a violation", f, err)
	}
	for _, want := range []string{"UnclampedRefund: ", " failed; ", "not linearizable"} {
		if !strings.Contains(f.Detail, want) {
			t.Errorf("the finding does not say %q:\n%s", want, f.Detail)
		}
	}
	// Found by a free run (this process is not instrumented), the
	// violation has no schedule to replay, and says so.
	if !strings.Contains(f.Detail, "replay it with: ") && !strings.Contains(f.Detail, "it cannot be replayed") {
		t.Errorf("the finding neither gives a replay nor says that it has none:\n%s", f.Detail)
	}
	fx, err := linearizability.LoadFixture(f.JSONPath)
	if err != nil {
		t.Fatal(err)
	}
	if r := linearizability.Recheck(fx, m, 0); r.Verdict != linearizability.Violation || fx.Scenario == nil {
		t.Errorf("the saved fixture rechecks as %v (scenario %v), want a violation with its scenario", r.Verdict, fx.Scenario)
	}
}

// Search passes the reference bucket.
func TestSearchPassesACorrectBudget(t *testing.T) {
	tg := tokenBucket(refillBucket)
	f, err := linearizability.Search(t, linearizability.Target[model.TokenBucketState]{
		Name: "TokenBucket", Model: refillBucket, Scenarios: 5, Scale: tg.timing.Scale, Horizon: tg.timing.Horizon,
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return tg.new(c) },
	})
	if err != nil || f != nil {
		t.Fatalf("Search = %+v, %v; want nothing found", f, err)
	}
}

// With Record, Search checks the histories it is given, of the scenarios
// Draw draws, and reports the first violation as found.
func TestSearchChecksRecordedHistories(t *testing.T) {
	m := smallBucket
	for _, c := range []struct {
		name   string
		new    func(budget.Clock) budget.Budget
		broken bool
	}{
		{"TokenBucket", tokenBucket(m).new, false},
		{"UnclampedRefund", func(budget.Clock) budget.Budget { return mutants.NewUnclampedRefund(m) }, true},
	} {
		var drawn []uint64
		f, err := linearizability.Search(t, linearizability.Target[model.TokenBucketState]{
			Name: c.name, Model: m, Scenarios: 4,
			Draw: func(seed uint64) linearizability.Scenario {
				drawn = append(drawn, seed)
				return tokenBucket(m).scenario(seed, 3, 40)
			},
			Record: func(s linearizability.Scenario) (model.History, error) {
				return linearizability.Record(context.Background(), s, c.new)
			},
		})
		switch {
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !c.broken && (f != nil || len(drawn) != 4):
			t.Errorf("%s: Search = %+v after scenarios %v; want nothing found in 4", c.name, f, drawn)
		case c.broken && (f == nil || f.Verdict != linearizability.Violation || !strings.Contains(f.Detail, "failed:\nscenario of")):
			t.Errorf("%s: Search = %+v; want a violation, reported as recorded", c.name, f)
		}
	}
}

// A target Search cannot run is an error, not a panic.
func TestSearchRejectsAnIncompleteTarget(t *testing.T) {
	for name, tg := range map[string]linearizability.Target[model.TokenBucketState]{
		"no model":          {New: func(*testing.T, budget.Clock) budget.Budget { return nil }},
		"no New, no Record": {Model: smallBucket},
	} {
		if f, err := linearizability.Search(t, tg); err == nil || f != nil {
			t.Errorf("%s: Search = %+v, %v; want an error", name, f, err)
		}
	}
}

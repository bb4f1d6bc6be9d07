package budgettest

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

// A violation a free run found, which no schedule replays, is run again
// on its scenario under control: met again there, it comes back with the
// lines where the calls met and a replay; not met, it says so. The free
// finding is made up here (a scenario saved as a fixture, in which two
// retries race for one retry's worth of tokens): which violations a free
// run meets that the controlled stage does not is a matter of luck.
func TestFreeFindingIsRunAgainUnderControl(t *testing.T) {
	m := model.TokenBucket{Capacity: 1_000, TransientCost: 1_000, ThrottledCost: 500, SuccessBonus: 100}
	retry := model.OpRetry(model.Transient)
	s := linearizability.Scenario{Goroutines: [][]model.Op{{retry}, {retry}}}
	for _, tt := range []struct {
		name  string
		build func() budget.Budget
		met   bool
	}{
		{"CheckThenAct", func() budget.Budget { return mutants.NewCheckThenAct(m) }, true},
		{"reference", func() budget.Budget { return seqcheck.NewTokenBucket(m)(nil) }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sub := Subject[model.TokenBucketState]{Name: tt.name, Model: m,
				New: func(*testing.T, budget.Clock) budget.Budget { return tt.build() }}
			c := enter(t)
			if c.skip {
				return
			}
			sub, f := sub.prepare(t)
			if f != nil {
				t.Fatal(f)
			}
			if c.child != "" {
				sub.runChild(t, c)
				return
			}
			path := filepath.Join(t.TempDir(), "free-violation.json")
			if err := (linearizability.Fixture{Name: "free", Budget: tt.name, Verdict: linearizability.Violation, Scenario: &s}).Save(path); err != nil {
				t.Fatal(err)
			}
			free := &Failure{Rule: string(ruleLinearizable), JSONPath: path,
				Detail: "scenario 1 failed\nfound by a free run, whose interleaving no schedule recorded: it cannot be replayed\n"}
			err := sub.rerunUnderControl(t, c, CheckLinearizable, free)
			var got *Failure
			if !errors.As(err, &got) {
				t.Fatalf("rerunUnderControl = %v, want a Failure", err)
			}
			if tt.met {
				for _, want := range []string{"found by a free run, and met again under control on its scenario:", "replay it with: -budgettest.replay=", "not linearizable"} {
					if !strings.Contains(got.Detail, want) {
						t.Errorf("the failure does not say %q:\n%s", want, got.Detail)
					}
				}
				return
			}
			if got != free || !strings.Contains(got.Detail, "run again under 64 controlled schedules, did not fail") {
				t.Errorf("the reference bucket, run again: %v", got)
			}
		})
	}
}

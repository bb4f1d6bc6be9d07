package budgettest

import (
	"errors"
	"flag"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/model"
)

// go test -race takes the controlled stage's pass from go test without
// it, on the same sources, flags and calls: its child is the same binary,
// built without the race detector. A failure is never taken (it is run
// again), and a flag that changes what the child runs is another key.
// Here the two runs are one process, which plays each part in turn.
func TestRaceRunTakesThePassOfThePlainRun(t *testing.T) {
	m := model.TokenBucket{Capacity: 1_000, TransientCost: 1_000, ThrottledCost: 500, SuccessBonus: 100}
	for _, tt := range []struct {
		name  string
		build func() budget.Budget
		pass  bool
	}{
		{"reference", func() budget.Budget { return seqcheck.NewTokenBucket(m)(nil) }, true},
		{"CheckThenAct", func() budget.Budget { return mutants.NewCheckThenAct(m) }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sub := Subject[model.TokenBucketState]{Name: tt.name, Model: m, Scenarios: 2,
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
			prevReuse, prevSave := reuseSaved, saveOutcomes
			t.Cleanup(func() { reuseSaved, saveOutcomes = prevReuse, prevSave })
			stage := func(reuse, save bool) (int64, error) {
				reuseSaved, saveOutcomes = reuse, save
				before := spawns.Load()
				err := sub.controlledStage(t, c, CheckLinearizable)
				return spawns.Load() - before, err
			}
			var failure *Failure

			n, err := stage(false, true) // go test
			if n != 1 || (err == nil) != tt.pass || (!tt.pass && !errors.As(err, &failure)) {
				t.Fatalf("without -race: %d children, %v; want one child and pass=%v", n, err, tt.pass)
			}
			n, err = stage(true, false) // go test -race
			switch {
			case tt.pass && (n != 0 || err != nil):
				t.Errorf("under -race after a pass: %d children, %v; want the saved pass, no child", n, err)
			case !tt.pass && (n != 1 || !errors.As(err, &failure)):
				t.Errorf("under -race after a failure: %d children, %v; want the child run again, and its failure", n, err)
			}

			// Another seed: the child would run other schedules.
			seed := flag.Lookup("budgettest.seed")
			prev := seed.Value.String()
			if err := seed.Value.Set("7"); err != nil {
				t.Fatal(err)
			}
			defer seed.Value.Set(prev)
			if n, _ = stage(true, false); n != 1 {
				t.Errorf("under -race with another -budgettest.seed: %d children, want 1 (nothing saved under that key)", n)
			}
		})
	}
}

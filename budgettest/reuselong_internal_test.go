package budgettest

import (
	"errors"
	"flag"
	"sync"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
)

// driftThrottle keeps gRFC A6's count in float64 tokens: its answers part
// from the model's only after a long run (see long_test.go).
type driftThrottle struct {
	mu     sync.Mutex
	tokens float64
}

func (t *driftThrottle) Request() {}
func (t *driftThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = max(t.tokens-1, 0)
	return t.tokens > 5
}
func (t *driftThrottle) Success(budget.Kind) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = min(t.tokens+0.1, 10)
}

// go test -race takes the long runs' pass from go test without it, on the
// same sources, flags and calls, and makes no run; a failure is never
// saved (the runs are made again, and fail again), and another seed is
// another key. Here the two runs are one process, which plays each part
// in turn; a Remote subject is saved alike.
func TestRaceRunTakesTheLongRunsOfThePlainRun(t *testing.T) {
	throttle := model.Throttle{Max: 10_000, Ratio: 100}
	for _, tt := range []struct {
		name   string
		build  func() budget.Budget
		remote bool
		pass   bool
	}{
		{"reference", func() budget.Budget { return seqcheck.NewThrottle(throttle)(nil) }, false, true},
		{"remote", func() budget.Budget { return seqcheck.NewThrottle(throttle)(nil) }, true, true},
		{"float drift", func() budget.Budget { return &driftThrottle{tokens: 10} }, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sub := Subject[model.ThrottleState]{Name: tt.name, Model: throttle, Remote: tt.remote,
				New: func(*testing.T, budget.Clock) budget.Budget { return tt.build() }}
			c := enter(t)
			if c.skip || c.child != "" {
				return
			}
			sub, f := sub.prepare(t)
			if f != nil {
				t.Fatal(f)
			}
			sub.caller = c
			prevReuse, prevSave := reuseSaved, saveOutcomes
			t.Cleanup(func() { reuseSaved, saveOutcomes = prevReuse, prevSave })
			long := func(reuse, save bool) (int64, error) {
				reuseSaved, saveOutcomes = reuse, save
				before := longRunsMade.Load()
				err := sub.longRuns(t)
				return longRunsMade.Load() - before, err
			}
			var failure *Failure

			n, err := long(false, true) // go test
			if n != 1 || (err == nil) != tt.pass || (!tt.pass && !errors.As(err, &failure)) {
				t.Fatalf("without -race: made the runs %d times, %v; want once, and pass=%v", n, err, tt.pass)
			}
			n, err = long(true, false) // go test -race
			switch {
			case tt.pass && (n != 0 || err != nil):
				t.Errorf("under -race after a pass: made the runs %d times, %v; want the saved pass, no run", n, err)
			case !tt.pass && (n != 1 || !errors.As(err, &failure)):
				t.Errorf("under -race after a failure: made the runs %d times, %v; want them made again, and their failure", n, err)
			}

			// Another seed: other runs.
			seed := flag.Lookup("budgettest.seed")
			prev := seed.Value.String()
			if err := seed.Value.Set("7"); err != nil {
				t.Fatal(err)
			}
			defer seed.Value.Set(prev)
			if n, _ = long(true, false); n != 1 {
				t.Errorf("under -race with another -budgettest.seed: made the runs %d times, want once (nothing saved under that key)", n)
			}
		})
	}
}

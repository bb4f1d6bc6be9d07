package budgettest

import (
	"errors"
	"flag"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
)

// FloatThrottle is gRFC A6's throttle with its count in float64 tokens, as
// grpc-go keeps it: a success adds 0.1, which no float64 holds exactly.
// Its answers part from the model's milli-tokens only after a long run
// (the shortest is 126 calls), where a drain, deposits at a low count and
// a climb leave it a hair above half when the model is at half exactly.
// Exported for this package's external tests (long_test.go).
type FloatThrottle struct {
	mu     sync.Mutex
	tokens float64
}

// NewFloatThrottle returns a full FloatThrottle (10 tokens).
func NewFloatThrottle() *FloatThrottle { return &FloatThrottle{tokens: 10} }

func (t *FloatThrottle) Request() {}
func (t *FloatThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = max(t.tokens-1, 0)
	return t.tokens > 5
}
func (t *FloatThrottle) Success(budget.Kind) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = min(t.tokens+0.1, 10)
}

// grantAll grants every retry: the replays' drain fails it.
type grantAll struct{}

func (grantAll) Request()               {}
func (grantAll) Retry(budget.Kind) bool { return true }
func (grantAll) Success(budget.Kind)    {}

// go test -race takes the pass of the long runs and of the Replay check
// from go test without it, on the same sources, flags and calls, and makes
// no run; a failure is never saved (the runs are made again, and fail
// again), and another seed is another key. Here the two runs are one process, which plays each part
// in turn; a Remote subject is saved alike.
func TestRaceRunTakesTheOneGoroutinePassesOfThePlainRun(t *testing.T) {
	throttle := model.Throttle{Max: 10_000, Ratio: 100}
	for _, tt := range []struct {
		name            string
		build           func() budget.Budget
		remote          bool
		longs, replayOK bool // the long runs pass, the replays pass
	}{
		{"reference", func() budget.Budget { return seqcheck.NewThrottle(throttle)(nil) }, false, true, true},
		{"remote", func() budget.Budget { return seqcheck.NewThrottle(throttle)(nil) }, true, true, true},
		{"float drift", func() budget.Budget { return NewFloatThrottle() }, false, false, true},
		{"never denies", func() budget.Budget { return grantAll{} }, false, false, false},
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
			for _, stage := range []struct {
				name string
				made *atomic.Int64
				run  func() error
			}{
				{"long runs", &longRunsMade, func() error { return sub.longRuns(t) }},
				{"Replay", &replaysMade, func() error { return checkReplay(t, sub) }},
			} {
				pass := tt.longs
				if stage.name == "Replay" {
					pass = tt.replayOK // the drift shows only in long runs
				}
				run := func(reuse, save bool) (int64, error) {
					reuseSaved, saveOutcomes = reuse, save
					before := stage.made.Load()
					err := stage.run()
					return stage.made.Load() - before, err
				}
				var failure *Failure

				n, err := run(false, true) // go test
				if n != 1 || (err == nil) != pass || (!pass && !errors.As(err, &failure)) {
					t.Fatalf("%s without -race: ran %d times, %v; want once, and pass=%v", stage.name, n, err, pass)
				}
				n, err = run(true, false) // go test -race
				switch {
				case pass && (n != 0 || err != nil):
					t.Errorf("%s under -race after a pass: ran %d times, %v; want the saved pass, no run", stage.name, n, err)
				case !pass && (n != 1 || !errors.As(err, &failure)):
					t.Errorf("%s under -race after a failure: ran %d times, %v; want it run again, and its failure", stage.name, n, err)
				}

				// Another seed: other runs.
				seed := flag.Lookup("budgettest.seed")
				prev := seed.Value.String()
				if err := seed.Value.Set("7"); err != nil {
					t.Fatal(err)
				}
				if n, _ = run(true, false); n != 1 {
					t.Errorf("%s under -race with another -budgettest.seed: ran %d times, want once (nothing saved under that key)", stage.name, n)
				}
				seed.Value.Set(prev)
			}
		})
	}
}

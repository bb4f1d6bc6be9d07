package linearizability

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// MaxGoroutines is the most goroutines a Scenario may run at once.
const MaxGoroutines = 16

// A Scenario is what one recorded run does.
type Scenario struct {
	// Before runs on one goroutine before the concurrent part starts:
	// it brings a budget to an interesting state, such as nearly empty.
	Before []model.Op `json:"before,omitempty"`
	// Goroutines holds one operation list per goroutine. The goroutines
	// start together at a barrier. Lists hold no Advance operations.
	Goroutines [][]model.Op `json:"goroutines"`
	// Clock holds the steps a clock goroutine makes, concurrently with the
	// others, each recorded as an Advance operation.
	Clock []time.Duration `json:"clock,omitempty"`
}

// Len returns how many operations s runs in all.
func (s Scenario) Len() int {
	n := len(s.Before) + len(s.Clock)
	for _, g := range s.Goroutines {
		n += len(g)
	}
	return n
}

// String lists s compactly, a line per goroutine.
func (s Scenario) String() string {
	var b strings.Builder
	line := func(name string, ops []model.Op) {
		if len(ops) == 0 {
			return
		}
		strs := make([]string, len(ops))
		for i, op := range ops {
			strs[i] = op.String()
		}
		fmt.Fprintf(&b, "  %-5s %s\n", name+":", strings.Join(strs, ", "))
	}
	fmt.Fprintf(&b, "scenario of %d operations:\n", s.Len())
	line("pre", s.Before)
	for i, g := range s.Goroutines {
		line(clientName(i+1), g)
	}
	if len(s.Clock) > 0 {
		steps := make([]model.Op, len(s.Clock))
		for i, d := range s.Clock {
			steps[i] = model.OpAdvance(d)
		}
		line("clock", steps)
	}
	return b.String()
}

func (s Scenario) validate() error {
	if len(s.Goroutines) > MaxGoroutines {
		return fmt.Errorf("linearizability: %d goroutines, at most %d", len(s.Goroutines), MaxGoroutines)
	}
	for i, g := range s.Goroutines {
		for _, op := range g {
			if op.Op == model.Advance {
				return fmt.Errorf("linearizability: goroutine %d has %v; clock steps belong in Scenario.Clock", i+1, op)
			}
		}
	}
	return nil
}

// GenConfig says what scenarios Generate draws. The zero value draws 4
// goroutines of 100 operations each and, when Scale is set, 20 clock steps.
type GenConfig struct {
	Goroutines int // in [1, 16]; 0 means 4
	Ops        int // operations per goroutine; 0 means 100
	Before     int // operations before the concurrent part; 0 means none
	ClockSteps int // 0 means Ops/5 when Scale > 0
	// Scale is the clock step around which the budget's behaviour changes
	// (a slot width; the time a refill takes to pay for one retry). Zero
	// means the budget ignores time: no clock steps are drawn.
	Scale time.Duration
	// Horizon is the longest step that still matters (a window; the time
	// to refill an empty bucket). Zero means 100 × Scale.
	Horizon time.Duration
	// Forward draws no backward clock steps, for budgets on the wall
	// clock, whose time cannot go back.
	Forward bool
}

func (c GenConfig) withDefaults() GenConfig {
	if c.Goroutines <= 0 {
		c.Goroutines = 4
	}
	c.Goroutines = min(c.Goroutines, MaxGoroutines)
	if c.Ops <= 0 {
		c.Ops = 100
	}
	if c.ClockSteps <= 0 && c.Scale > 0 {
		c.ClockSteps = max(c.Ops/5, 1)
	}
	if c.Scale <= 0 {
		c.ClockSteps = 0
	}
	if c.Horizon <= 0 {
		c.Horizon = 100 * c.Scale
	}
	return c
}

// Generate draws a scenario from r. The same r state gives the same
// scenario. Retries are half the operations, mostly of retry kinds with a
// few of kinds no caller should pass; successes mostly refund retries.
func Generate(r *rand.Rand, c GenConfig) Scenario {
	c = c.withDefaults()
	s := Scenario{Goroutines: make([][]model.Op, c.Goroutines)}
	s.Before = drawOps(r, c.Before)
	for i := range s.Goroutines {
		s.Goroutines[i] = drawOps(r, c.Ops)
	}
	for range c.ClockSteps {
		d := drawStep(r, c.Scale, c.Horizon)
		if c.Forward && d < 0 {
			d = -d
		}
		s.Clock = append(s.Clock, d)
	}
	return s
}

func drawOps(r *rand.Rand, n int) []model.Op {
	if n == 0 {
		return nil
	}
	ops := make([]model.Op, n)
	for i := range ops {
		ops[i] = drawOp(r)
	}
	return ops
}

func drawOp(r *rand.Rand) model.Op {
	kind := func() model.Kind {
		switch x := r.IntN(20); {
		case x < 9:
			return model.Transient
		case x < 18:
			return model.Throttled
		case x < 19:
			return model.FirstAttempt
		}
		return model.Kind(7)
	}
	switch x := r.IntN(10); {
	case x < 5:
		return model.OpRetry(kind())
	case x < 8:
		return model.OpSuccess(kind())
	}
	return model.OpRequest
}

func drawStep(r *rand.Rand, scale, horizon time.Duration) time.Duration {
	between := func(lo, hi int64) time.Duration { return time.Duration(lo + r.Int64N(max(hi-lo, 0)+1)) }
	switch r.IntN(10) {
	case 0:
		return 0
	case 1, 2, 3:
		return between(1, max(int64(scale)/2, 1))
	case 4, 5, 6:
		return between(max(int64(scale)-1, 1), int64(scale)+1)
	case 7, 8:
		return between(1, int64(horizon))
	}
	return -between(1, int64(scale))
}

// ErrTimeout is returned by Record when the run did not finish before its
// context ended: the budget deadlocked, or is far too slow.
var ErrTimeout = errors.New("linearizability: the run did not finish; a goroutine is stuck in the budget")

// Record runs s once on a budget that newBudget builds on a fresh
// ManualClock reading 0, and returns the history. While a scenario has more
// goroutines than GOMAXPROCS, Record raises GOMAXPROCS (to at least 8) for
// the run, process-wide. If ctx ends first, Record
// returns ErrTimeout joined with ctx's error; the stuck goroutines are left
// behind, since nothing can stop them.
func Record(ctx context.Context, s Scenario, newBudget func(budget.Clock) budget.Budget) (History, error) {
	return RecordWith(ctx, s, newBudget, nil)
}

// RecordWith is Record with advance, if not nil, moving time instead of the
// ManualClock's Advance: for a budget that reads the wall clock inside a
// testing/synctest bubble, advance sleeps.
func RecordWith(ctx context.Context, s Scenario, newBudget func(budget.Clock) budget.Budget, advance func(*budget.ManualClock, time.Duration)) (History, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	type result struct {
		h   History
		err error
	}
	done := make(chan result, 1)
	go func() {
		h, err := record(s, newBudget, advance)
		done <- result{h, err}
	}()
	select {
	case r := <-done:
		return r.h, r.err
	case <-ctx.Done():
		return nil, errors.Join(ErrTimeout, ctx.Err())
	}
}

func record(s Scenario, newBudget func(budget.Clock) budget.Budget, advance func(*budget.ManualClock, time.Duration)) (h History, err error) {
	// More Ps than cores when there are more goroutines than Ps: the
	// operating system then preempts the threads running them at arbitrary
	// instructions, inside the budget's calls too, and a race between two
	// of its steps shows even on a machine whose cores are busy with other
	// work. (Changing GOMAXPROCS stops the world, so small scenarios, run
	// thousands of times by the minimizer, keep what they have.)
	if n := len(s.Goroutines) + 1; runtime.GOMAXPROCS(0) < n {
		prev := runtime.GOMAXPROCS(max(8, n))
		defer runtime.GOMAXPROCS(prev)
	}
	clock := new(budget.ManualClock)
	var b budget.Budget
	if err := recovered("building the budget", func() { b = newBudget(clock) }); err != nil {
		return nil, err
	}
	if b == nil {
		return nil, errors.New("linearizability: the factory returned a nil budget")
	}
	var stamp atomic.Int64
	run := func(client int, op model.Op) Operation {
		o := Operation{Client: client, Op: op}
		o.Call = stamp.Add(1)
		switch {
		case op.Op != model.Advance:
			o.Granted = Perform(b, op)
		case advance != nil:
			advance(clock, op.D)
		default:
			clock.Advance(op.D)
		}
		o.Return = stamp.Add(1)
		return o
	}

	if err := recovered("running the operations before the concurrent part", func() {
		for _, op := range s.Before {
			h = append(h, run(0, op))
		}
	}); err != nil {
		return nil, err
	}

	lists := slices.Clone(s.Goroutines)
	if len(s.Clock) > 0 {
		steps := make([]model.Op, len(s.Clock))
		for i, d := range s.Clock {
			steps[i] = model.OpAdvance(d)
		}
		lists = append(lists, steps)
	}
	results := make([]History, len(lists))
	errs := make([]error, len(lists))
	var ready atomic.Int32
	var start atomic.Bool
	var wg sync.WaitGroup
	for i, ops := range lists {
		wg.Go(func() {
			out := make(History, 0, len(ops))
			ready.Add(1)
			waitFor(&start)
			// A random delay of up to a few microseconds before the first
			// operation: runs of one scenario then sample every relative
			// offset of the goroutines, and a race that needs two calls to
			// meet within nanoseconds reproduces in a few hundred runs.
			spin(rand.IntN(startJitter))
			errs[i] = recovered(fmt.Sprintf("goroutine %d", i+1), func() {
				for j, op := range ops {
					out = append(out, run(i+1, op))
					if j%4 == 3 && rand.IntN(2) == 0 {
						runtime.Gosched()
					}
				}
			})
			results[i] = out
		})
	}
	for ready.Load() < int32(len(lists)) {
		runtime.Gosched()
	}
	start.Store(true)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, r := range results {
		h = append(h, r...)
	}
	slices.SortFunc(h, func(a, b Operation) int { return int(a.Call - b.Call) })
	return h, nil
}

// startJitter bounds the random delay before a goroutine's first
// operation, in spin iterations of about a nanosecond each.
const startJitter = 1024

// waitFor spins until flag is set, yielding now and then so that waiting
// goroutines never starve the one that will set it.
func waitFor(flag *atomic.Bool) {
	for i := 0; !flag.Load(); i++ {
		if i%64 == 63 {
			runtime.Gosched()
		}
	}
}

var spinSink atomic.Int64

// spin busy-waits for about n nanoseconds.
func spin(n int) {
	for i := 0; i < n; i++ {
		spinSink.Load()
	}
}

// recovered runs f and turns a panic into an error naming what was running.
func recovered(what string, f func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("linearizability: the budget panicked while %s: %v", what, p)
		}
	}()
	f()
	return nil
}

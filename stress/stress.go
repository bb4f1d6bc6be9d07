package stress

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

// Config says how hard Stress pushes.
type Config struct {
	// Goroutines is how many goroutines call the budget at once. Zero
	// means 4 × GOMAXPROCS, after GOMAXPROCS is raised to at least 8.
	Goroutines int
	// Ops is how many calls each goroutine makes in each phase. Zero
	// means 200.
	Ops int
	// ClockStep is how far the clock moves between phases. Zero leaves
	// the clock at 0 throughout.
	ClockStep time.Duration
	// Timeout bounds the whole run; a run still going then is reported
	// as a deadlock. Zero means 60s.
	Timeout time.Duration
	// Seed chooses the operations.
	Seed uint64
}

// The kinds of phase. A drain phase only retries, so the invariants are
// tight. In a paired phase every granted retry is followed by the success
// that refunds it: a token bucket then hovers at its boundary without ever
// clamping a credit, and every call contends for the last tokens. A mixed
// phase also requests and succeeds at first attempts, so that the budget
// refills and drains again.
type phaseKind int

const (
	drain phaseKind = iota
	paired
	mixed
)

// The phases of a run, in order. A mixed phase that starts from an empty
// budget is where most overspending shows: many calls refill it a little
// and many compete for each token.
var phases = []phaseKind{drain, paired, drain, mixed, drain, mixed, drain, mixed, drain, mixed, drain, paired, drain, mixed, drain, mixed, drain}

// An Entry is one recorded call.
type Entry struct {
	linearizability.Operation
	Phase int
}

// A Run is the log of one stress run.
type Run struct {
	Entries    []Entry
	Clock      []time.Duration // the clock's reading during each phase
	Goroutines int
	// Balance holds, for a budget with an Available() float64 method, its
	// balance before each phase and after the last, read while no call is
	// in flight; nil for other budgets.
	Balance []float64
}

// A Balancer is a budget that reports its balance, as TokenBucket and
// Throttle do. Stress reads it between phases, when no call is in flight,
// and the invariants then hold phase by phase, which makes them tight.
type Balancer interface {
	Available() float64
}

// ErrDeadlock is returned when a run does not finish within its timeout.
var ErrDeadlock = errors.New("stress: the run did not finish; the budget deadlocked or livelocked")

// Stress runs the phases on a budget built by newBudget on a ManualClock
// reading 0, and returns the log. If the run does not finish within the
// timeout it returns ErrDeadlock with the stacks of the stuck goroutines;
// they are left behind, since nothing can stop them.
func Stress(ctx context.Context, c Config, newBudget func(budget.Clock) budget.Budget) (*Run, error) {
	prev := runtime.GOMAXPROCS(0)
	if prev < 8 {
		runtime.GOMAXPROCS(8)
		defer runtime.GOMAXPROCS(prev)
	}
	if c.Goroutines <= 0 {
		c.Goroutines = 4 * runtime.GOMAXPROCS(0)
	}
	if c.Ops <= 0 {
		c.Ops = 200
	}
	if c.Timeout <= 0 {
		c.Timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	type result struct {
		run *Run
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := stress(c, newBudget)
		done <- result{r, err}
	}()
	select {
	case r := <-done:
		return r.run, r.err
	case <-ctx.Done():
		buf := make([]byte, 16<<10) // the first 16 KiB of stacks name the stuck calls
		buf = buf[:runtime.Stack(buf, true)]
		return nil, fmt.Errorf("%w after %v (%w)\ngoroutines:\n%s", ErrDeadlock, c.Timeout, ctx.Err(), buf)
	}
}

func stress(c Config, newBudget func(budget.Clock) budget.Budget) (run *Run, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("stress: the budget panicked: %v", p)
		}
	}()
	clock := new(budget.ManualClock)
	b := newBudget(clock)
	if b == nil {
		return nil, errors.New("stress: the factory returned a nil budget")
	}
	run = &Run{Goroutines: c.Goroutines}
	var stamp atomic.Int64
	logs := make([][]Entry, c.Goroutines)
	panics := make([]any, c.Goroutines)
	for p, kind := range phases {
		if p > 0 {
			clock.Advance(c.ClockStep)
		}
		run.Clock = append(run.Clock, clock.Now())
		if bal, ok := b.(Balancer); ok {
			run.Balance = append(run.Balance, bal.Available())
		}
		var ready sync.WaitGroup
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range c.Goroutines {
			ready.Add(1)
			wg.Go(func() {
				defer func() {
					if r := recover(); r != nil {
						panics[g] = r
					}
				}()
				rng := rand.New(rand.NewPCG(c.Seed, uint64(p*1_000_000+g)))
				ops := make([]model.Op, c.Ops)
				for i := range ops {
					ops[i] = drawOp(rng, kind)
				}
				ready.Done()
				<-start
				call := func(op model.Op) bool {
					e := Entry{Operation: linearizability.Operation{Client: g + 1, Op: op}, Phase: p}
					e.Call = stamp.Add(1)
					e.Granted = linearizability.Perform(b, op)
					e.Return = stamp.Add(1)
					logs[g] = append(logs[g], e)
					return e.Granted
				}
				for i, op := range ops {
					if call(op) && kind == paired {
						call(model.OpSuccess(op.Kind))
					}
					if i%3 == 0 && rng.IntN(2) == 0 {
						runtime.Gosched()
					}
				}
			})
		}
		ready.Wait()
		close(start)
		wg.Wait()
		for g, p := range panics {
			if p != nil {
				return nil, fmt.Errorf("stress: the budget panicked in goroutine %d: %v", g+1, p)
			}
		}
	}
	if bal, ok := b.(Balancer); ok {
		run.Balance = append(run.Balance, bal.Available())
	}
	for _, l := range logs {
		run.Entries = append(run.Entries, l...)
	}
	slices.SortFunc(run.Entries, func(a, b Entry) int { return int(a.Call - b.Call) })
	return run, nil
}

func drawOp(r *rand.Rand, phase phaseKind) model.Op {
	kind := model.Transient
	if r.IntN(2) == 0 {
		kind = model.Throttled
	}
	if phase != mixed {
		return model.OpRetry(kind)
	}
	switch x := r.IntN(10); {
	case x < 2:
		return model.OpRequest
	case x < 6:
		return model.OpRetry(kind)
	case x < 9:
		return model.OpSuccess(kind)
	}
	return model.OpSuccess(model.FirstAttempt)
}

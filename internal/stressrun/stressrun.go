// Package stressrun hammers a budget from many goroutines at once and checks
// the log against its family's conservation invariant: the Race and
// Invariant checks of the suite.
package stressrun

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/procs"
	"github.com/retrybudget/retrybudget/internal/sched"
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
	// as stuck. Zero means 60s.
	Timeout time.Duration
	// Within is how long the goroutines go on starting calls: past it,
	// each finishes the call it is in and starts no other, the phases
	// left are not run, and Run.CutShort is set. A correct budget that is
	// slow under contention (a spin lock on oversubscribed cores, under
	// the race detector) then gives a shorter run, checked as it is,
	// where Timeout alone would call it stuck; a call that never returns
	// still reaches Timeout. Zero means a third of Timeout, at most 10 s.
	// It does not apply under Control.
	Within time.Duration
	// Seed chooses the operations.
	Seed uint64
	// Unstamped leaves the calls unstamped: every Entry's Call and Return
	// stay 0, and Run.Entries hold goroutine 1's calls, then goroutine
	// 2's, and so on. The stamps come from one atomic counter, which the
	// race detector takes for a synchronization: a call then happens
	// before every call of another goroutine stamped after it returned,
	// and only calls that overlap in time can race, of which a run on
	// cores busy with other work may have too few for the detector to
	// report one. Unstamped, nothing orders the calls of a phase: any two
	// conflicting calls of different goroutines race, whenever each runs.
	// The Race check sets it; it does not read the log.
	Unstamped bool
	// Control, if set, runs the goroutines of each phase under a
	// controlled scheduler (package yield), one at a time, with a yield
	// point between any two calls; phase p runs with the seed Seed+p.
	// The race detector sees no race in such a run: every switch is a
	// synchronization. Run.Reports holds each phase's report.
	Control *sched.Options
}

// defaultWithin bounds the default of Config.Within: a correct budget
// makes a whole run in well under a second, under the race detector too.
const defaultWithin = 10 * time.Second

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
	model.Operation
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
	// Reports holds the report of each phase's controlled run, under
	// Config.Control.
	Reports []sched.Report
	// CutShort is set when the run reached Config.Within: the goroutines
	// stopped starting calls, and the phases past the last in Clock were
	// not run.
	CutShort bool
}

// A Balancer is a budget that reports its balance, as TokenBucket and
// Throttle do. Stress reads it between phases, when no call is in flight,
// and the invariants then hold phase by phase, which makes them tight.
type Balancer interface {
	Available() float64
}

// Stress runs the phases on a budget that sub builds on a ManualClock
// reading 0, closes it, and returns the log. A panic in the factory or the
// budget is returned as a *harness.Fault; a run that does not finish within
// c.Timeout returns a Stuck Fault with every goroutine's stack, and its
// goroutines are left behind, since nothing can stop them.
func Stress[S any](c Config, sub harness.Subject[S]) (*Run, error) {
	if c.Control != nil {
		sched.ResetFine() // whether the budget may race is learned anew (see sched.Options.Fine)
	}
	ps, release := procs.AtLeast(8)
	defer release()
	if c.Goroutines <= 0 {
		c.Goroutines = 4 * ps
	}
	if c.Ops <= 0 {
		c.Ops = 200
	}
	if c.Timeout <= 0 {
		c.Timeout = harness.DefaultWatchdog
	}
	if c.Within <= 0 {
		c.Within = min(c.Timeout/3, defaultWithin)
	}
	var run *Run
	err := harness.Guard("the stress run", c.Timeout, func() error {
		var err error
		run, err = stress(c, sub)
		return err
	})
	return run, err
}

func stress[S any](c Config, sub harness.Subject[S]) (*Run, error) {
	clock := new(budget.ManualClock)
	b, closeBudget := sub.Open(clock)
	defer closeBudget()
	run := &Run{Goroutines: c.Goroutines}
	var stamp atomic.Int64
	var stop atomic.Bool
	if c.Control == nil {
		t := time.AfterFunc(c.Within, func() { stop.Store(true) })
		defer t.Stop()
	}
	logs := make([][]Entry, c.Goroutines)
	for g := range logs {
		logs[g] = make([]Entry, 0, len(phases)*c.Ops) // a paired phase adds more
	}
	faults := make([]error, c.Goroutines)
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
		var controlled []func()
		for g := range c.Goroutines {
			ready.Add(1)
			body := func() {
				rng := harness.Rand(rand.New(rand.NewPCG(c.Seed, uint64(p*1_000_000+g))))
				ops := make([]model.Op, c.Ops)
				for i := range ops {
					ops[i] = drawOp(rng, kind)
				}
				ready.Done()
				if c.Control == nil {
					<-start
				}
				call := func(op model.Op) bool {
					e := Entry{Operation: model.Operation{Client: g + 1, Op: op}, Phase: p}
					if c.Unstamped {
						e.Granted = harness.Perform(b, op)
					} else {
						e.Call = stamp.Add(1)
						e.Granted = harness.Perform(b, op)
						e.Return = stamp.Add(1)
					}
					logs[g] = append(logs[g], e)
					return e.Granted
				}
				faults[g] = harness.Catch(fmt.Sprintf("goroutine %d of the stress run", g+1), func() {
					for i, op := range ops {
						if c.Control != nil {
							sched.Hook.Boundary()
						} else if stop.Load() {
							return
						}
						if call(op) && kind == paired {
							call(model.OpSuccess(op.Kind))
						}
						if c.Control == nil && i%3 == 0 && rng.IntN(2, "") == 0 {
							runtime.Gosched()
						}
					}
				})
			}
			if c.Control != nil {
				controlled = append(controlled, body)
				continue
			}
			wg.Go(body)
		}
		if c.Control != nil {
			o := *c.Control
			o.Seed += uint64(p)
			var returned sync.WaitGroup
			returned.Add(len(controlled))
			for i, f := range controlled {
				controlled[i] = func() {
					defer returned.Done()
					f()
				}
			}
			rep := sched.Run(o, controlled...)
			run.Reports = append(run.Reports, rep)
			if rep.Exhausted {
				// Past the step bound the calls run freely: many steps
				// are not a livelock (bounded work under a lock takes
				// many), so they are waited for; a call that never
				// returns is the watchdog's (harness.Guard).
				returned.Wait()
			}
		} else {
			ready.Wait()
			close(start)
			wg.Wait()
		}
		for _, f := range faults {
			if f != nil {
				return nil, f
			}
		}
		if stop.Load() {
			run.CutShort = true
			break
		}
	}
	if bal, ok := b.(Balancer); ok {
		run.Balance = append(run.Balance, bal.Available())
	}
	n := 0
	for _, l := range logs {
		n += len(l)
	}
	run.Entries = make([]Entry, 0, n)
	for _, l := range logs {
		run.Entries = append(run.Entries, l...)
	}
	if !c.Unstamped {
		slices.SortFunc(run.Entries, func(a, b Entry) int { return int(a.Call - b.Call) })
	}
	return run, nil
}

// drawOp draws one operation of a phase: a retry in a drain or paired
// phase, any call in a mixed one.
func drawOp(src harness.Source, phase phaseKind) model.Op {
	if phase != mixed {
		return model.OpRetry(harness.RetryKind(src))
	}
	return harness.Call(src)
}

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
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/procs"
	"github.com/retrybudget/retrybudget/internal/sched"
	"github.com/retrybudget/retrybudget/model"
)

// maxGoroutines is the most goroutines a Scenario may run at once.
const maxGoroutines = 16

// A Scenario is what one recorded run does.
type Scenario struct {
	// Before runs on one goroutine before the concurrent part starts:
	// it brings a budget to an interesting state, such as nearly empty.
	// It may hold Advance operations.
	Before []model.Op `json:"before,omitempty"`
	// Goroutines holds one operation list per goroutine, at most 16. The
	// goroutines start together at a barrier. Lists hold no Advance
	// operations.
	Goroutines [][]model.Op `json:"goroutines"`
	// Clock holds the steps a clock goroutine makes, concurrently with the
	// others, each recorded as an Advance operation.
	Clock []time.Duration `json:"clock,omitempty"`
	// WallClock makes every clock step also sleep for its duration, for a
	// budget that reads time.Now itself inside a testing/synctest bubble.
	WallClock bool `json:"wallClock,omitempty"`
	// Structured says each goroutine's list is calls of an in-flight
	// budget (model.Structured), drawn with every retry granted: the
	// recorder then skips, after a Retry that is denied, the rest of that
	// call up to its CallEnd, so that nothing ends that never started.
	// Before holds only the Requests and Retries of calls it leaves open;
	// a goroutine's list may begin by continuing one of those calls, with
	// a Retry. minimize keeps every list well-formed (harness.WellFormed).
	Structured bool `json:"structured,omitempty"`
	// Control, if set, runs the goroutines one at a time under the
	// controlled scheduler of package yield, with these options: with
	// their Schedule, exactly as a run that reported it. It needs code
	// rewritten by the budgetcheck command; without it the goroutines
	// still run one at a time, switching only where they start and end.
	Control *sched.Options `json:"control,omitempty"`
}

// len returns how many operations s runs in all.
func (s Scenario) len() int {
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
		var strs []string
		for i := 0; i < len(ops); {
			j := i + 1
			for j < len(ops) && ops[j] == ops[i] {
				j++
			}
			if j-i > 2 {
				strs = append(strs, fmt.Sprintf("%v ×%d", ops[i], j-i))
			} else {
				for k := i; k < j; k++ {
					strs = append(strs, ops[k].String())
				}
			}
			i = j
		}
		for i, l := range wrapList(strs, lineWidth) {
			if i == 0 {
				fmt.Fprintf(&b, "  %-5s %s\n", name+":", l)
			} else {
				fmt.Fprintf(&b, "  %-5s %s\n", "", l)
			}
		}
	}
	if s.Structured {
		// A run skips the rest of a call after a denied retry, so its
		// history may hold fewer operations than are listed.
		fmt.Fprintf(&b, "scenario of %d operations (calls of an in-flight budget: after a retry that is denied, the rest of its call is not run):\n", s.len())
	} else {
		fmt.Fprintf(&b, "scenario of %d operations:\n", s.len())
	}
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
	if len(s.Goroutines) > maxGoroutines {
		return fmt.Errorf("linearizability: %d goroutines, at most %d", len(s.Goroutines), maxGoroutines)
	}
	for i, g := range s.Goroutines {
		for _, op := range g {
			if op.Op == model.Advance {
				return fmt.Errorf("linearizability: goroutine %d has %v; clock steps belong in Scenario.Clock", i+1, op)
			}
		}
		if s.Structured {
			if err := harness.WellFormed(g); err != nil {
				return fmt.Errorf("linearizability: goroutine %d: %w", i+1, err)
			}
		}
	}
	if s.Structured {
		open := 0
		for _, op := range s.Before {
			if op.Op != model.Request && op.Op != model.Retry {
				return fmt.Errorf("linearizability: a structured scenario's Before holds %v; it may hold only Requests and Retries", op)
			}
			if op.Op == model.Request {
				open++
			}
		}
		continuing := 0
		for _, g := range s.Goroutines {
			if harness.Continues(g) {
				continuing++
			}
		}
		if continuing > open {
			return fmt.Errorf("linearizability: %d goroutines continue a call that Before started, but Before starts %d", continuing, open)
		}
	}
	return nil
}

// ErrTimeout is returned by Record when the run did not finish before its
// context ended: the budget deadlocked, or is far too slow.
var ErrTimeout = errors.New("linearizability: the run did not finish; a goroutine is stuck in the budget")

// Record runs s once on a budget that newBudget builds on a fresh
// ManualClock reading 0, closes the budget if it has a Close() error
// method, and returns the history. Calls and returns are stamped from one
// atomic counter; every clock step is an Advance operation of the history,
// made by the clock goroutine.
//
// A panic in the factory or in a budget method is returned as an error
// naming the method and the operation; it never crashes the process. While
// a scenario of more than 16 operations has more goroutines than
// GOMAXPROCS, Record raises GOMAXPROCS (to at least 8) for the run,
// process-wide. If ctx ends first, Record
// returns ErrTimeout joined with ctx's error; the stuck goroutines are left
// behind, since nothing can stop them.
func Record(ctx context.Context, s Scenario, newBudget func(budget.Clock) budget.Budget) (model.History, error) {
	h, _, err := recordControlled(ctx, s, newBudget)
	return h, err
}

// recordControlled is Record that also returns, for a scenario with
// Control set, the report of the controlled run: the schedule that
// replays it, and whether it fell back to free running.
func recordControlled(ctx context.Context, s Scenario, newBudget func(budget.Clock) budget.Budget) (model.History, sched.Report, error) {
	if err := s.validate(); err != nil {
		return nil, sched.Report{}, err
	}
	type result struct {
		h   model.History
		rep sched.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		if err := harness.Catch("the recorded run", func() { r.h, r.rep, r.err = record(s, newBudget) }); err != nil {
			r.err = err
		}
		done <- r
	}()
	select {
	case r := <-done:
		return r.h, r.rep, r.err
	case <-ctx.Done():
		return nil, sched.Report{}, errors.Join(ErrTimeout, ctx.Err())
	}
}

func record(s Scenario, newBudget func(budget.Clock) budget.Budget) (h model.History, rep sched.Report, err error) {
	// More Ps than cores when there are more goroutines than Ps: the
	// operating system then preempts the threads running them at arbitrary
	// instructions, inside the budget's calls too, and a race between two
	// of its steps shows even on a machine whose cores are busy with other
	// work. (Changing GOMAXPROCS stops the world, so small scenarios, run
	// thousands of times by the minimizer, keep what they have: their
	// goroutines then start on cores of their own.)
	if n := len(s.Goroutines) + 1; s.Control == nil && runtime.GOMAXPROCS(0) < n && s.len() > smallScenario {
		_, release := procs.AtLeast(max(8, n))
		defer release()
	}
	sub := harness.Subject[struct{}]{New: newBudget, WallClock: s.WallClock}
	clock := new(budget.ManualClock)
	var stamp atomic.Int64
	lists := slices.Clone(s.Goroutines)
	if len(s.Clock) > 0 {
		steps := make([]model.Op, len(s.Clock))
		for i, d := range s.Clock {
			steps[i] = model.OpAdvance(d)
		}
		lists = append(lists, steps)
	}
	reads := newReadClock(clock, &stamp, len(lists)+1)
	var b budget.Budget
	if s.Control == nil {
		var closeBudget func()
		b, closeBudget = sub.Open(reads)
		defer closeBudget()
	}
	run := func(client int, op model.Op) model.Operation {
		o := model.Operation{Client: client, Op: op}
		o.Call = stamp.Add(1)
		if s.Control != nil {
			sched.Hook.Tag(o.Call) // a traced run's steps name the call they are inside
		}
		if op.Op == model.Advance {
			sched.Hook.Outside(func() { sub.Advance(clock, op.D) })
		} else {
			reads.begin(client)
			o.Granted = harness.Perform(b, op)
			o.ReadFrom, o.ReadTo = reads.end(client)
		}
		if s.Control != nil {
			// The return's stamp in a step of its own, which an
			// exhaustive search orders against the calls' stamps.
			sched.Hook.PointAt(&stamp)
		}
		o.Return = stamp.Add(1)
		if s.Control != nil {
			sched.Hook.Tag(0)
		}
		return o
	}
	before := func() {
		reads.enter(0)
		defer reads.leave(0)
		for _, op := range s.Before {
			h = append(h, run(0, op))
		}
	}
	if s.Control == nil {
		before()
	}
	results := make([]model.History, len(lists))
	errs := make([]error, len(lists))
	var cleanup func()
	body := func(i int) {
		ops := lists[i]
		out := make(model.History, 0, len(ops))
		errs[i] = harness.Catch(fmt.Sprintf("goroutine %d of the recorded run", i+1), func() {
			reads.enter(i + 1)
			defer reads.leave(i + 1)
			var skip harness.Skipper
			for j, op := range ops {
				if s.Structured && skip.Skip(op) {
					continue
				}
				if s.Control != nil {
					// A switch between any two operations, free of the
					// bound of preemptions; the step stamps the call.
					sched.Hook.Between()
					sched.Hook.PointAt(&stamp)
				}
				o := run(i+1, op)
				skip.Saw(op, o.Granted)
				out = append(out, o)
				if s.Control == nil && j%4 == 3 && rand.IntN(2) == 0 {
					runtime.Gosched()
				}
			}
		})
		results[i] = out
	}
	if s.Control != nil {
		// The budget is built, and the operations before the goroutines
		// run, inside the controlled run, by its first goroutine, while the
		// others wait: the goroutines the factory starts (a refill loop)
		// are then under control too.
		built := make(chan struct{})
		openErr := error(&harness.Fault{Cause: harness.FactoryExited})
		var beforeErr error
		// Only the goroutines with operations run: the minimizer drops a
		// goroutine whose list it has emptied, and the schedule of the
		// scenario it keeps must mean what it meant in the run that
		// failed.
		var busy []int
		for i, l := range lists {
			if len(l) > 0 {
				busy = append(busy, i)
			}
		}
		fs := make([]func(), max(1, len(busy)))
		var returned sync.WaitGroup
		returned.Add(len(fs))
		for i := range fs {
			fs[i] = func() {
				defer returned.Done()
				if i > 0 {
					sched.AwaitClose(built)
				} else {
					func() {
						defer sched.Close(built)
						var closeBudget func()
						b, closeBudget, openErr = sub.Build(reads)
						if openErr == nil {
							defer func() { cleanup = closeBudget }()
							// A panic here is the budget's, as in a
							// goroutine's operations, and the run goes on.
							// The budget's own goroutines run until they
							// idle, before and after the operations
							// before (see sched.Hook.Settle).
							beforeErr = harness.Catch("the operations before the goroutines of the recorded run", func() {
								sched.Hook.Settle()
								sched.Hook.Alone(before)
								sched.Hook.Settle()
							})
						}
					}()
				}
				if openErr == nil && i < len(busy) {
					body(busy[i])
				}
			}
		}
		rep = sched.Run(*s.Control, fs...)
		if rep.Exhausted {
			// The calls went past the step bound and run freely now. Many
			// steps are not a livelock: a budget that does bounded work
			// under its lock (a recount of its slots) takes many. So the
			// run is waited for, and read as a free one; a call that never
			// returns is the watchdog's (harness.Guard), which sees no
			// call of the budget return.
			returned.Wait()
		}
		if cleanup != nil {
			defer cleanup()
		}
		if openErr != nil {
			panic(openErr)
		}
		if beforeErr != nil {
			return nil, rep, beforeErr
		}
	} else {
		freeRun(len(lists), s.len() <= smallScenario, body)
	}
	for _, e := range errs {
		if e != nil {
			return nil, rep, e // the first: a *harness.Fault the suite reads the cause from
		}
	}
	for _, r := range results {
		h = append(h, r...)
	}
	slices.SortFunc(h, func(a, b model.Operation) int { return int(a.Call - b.Call) })
	return h, rep, nil
}

// freeRun runs body(0) to body(n-1) on goroutines of their own, released
// together. A random delay before each goroutine's first operation: runs
// of one scenario then sample every relative offset of the goroutines, and
// a race that needs two calls to meet within nanoseconds reproduces in a
// few hundred runs. Small scenarios, the minimizer's, get a shorter one,
// so that their few calls meet more often.
func freeRun(n int, small bool, body func(i int)) {
	jitter := startJitter
	if small {
		jitter = startJitter / 16
	}
	var ready atomic.Int32
	var start atomic.Bool
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// The last goroutine to arrive releases the others: no
			// goroutine outside the run holds a core when they start.
			if ready.Add(1) == int32(n) {
				start.Store(true)
			}
			waitFor(&start)
			spin(rand.IntN(jitter))
			body(i)
		})
	}
	wg.Wait()
}

// smallScenario is the most operations of a scenario that the minimizer
// runs thousands of times: it keeps GOMAXPROCS, and gets a shorter jitter.
const smallScenario = 16

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

// lineWidth is the width the lists of a report are wrapped at, so that no
// line a person reads runs past 200 characters.
const lineWidth = 150

// wrapList joins items with ", " into lines of at most width characters
// (an item longer than that stands alone).
func wrapList(items []string, width int) []string {
	var lines []string
	var cur strings.Builder
	for i, it := range items {
		sep := ""
		if i < len(items)-1 {
			sep = ","
		}
		if cur.Len() > 0 && cur.Len()+1+len(it)+len(sep) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(it + sep)
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}

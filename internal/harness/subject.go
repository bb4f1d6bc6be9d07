package harness

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// Timing says which clock steps matter to a budget.
type Timing struct {
	// Scale is the step around which answers change: a slot width, the
	// time a refill takes to pay for one retry. Zero means the budget's
	// answers do not depend on time, and no clock steps are drawn.
	Scale time.Duration
	// Horizon is the longest step that still matters: a window, the time
	// to refill an empty bucket. Zero means 100 × Scale.
	Horizon time.Duration
	// Forward draws no backward step and no jump beyond 100 horizons: for
	// a budget on the wall clock of a testing/synctest bubble, whose time
	// cannot go back and whose timers overflow past the year 2262.
	Forward bool
}

// horizon returns Horizon, or 100 × Scale when it is zero.
func (tm Timing) horizon() int64 {
	if tm.Horizon > 0 {
		return int64(tm.Horizon)
	}
	return 100 * int64(tm.Scale)
}

// A Subject is one budget under test, as every check sees it: the suite
// builds it once from the user's description, validated, and hands the same
// value to each checker.
type Subject[S any] struct {
	Name  string
	Model model.Model[S]
	// New builds a budget on clock, which reads what the check needs (0
	// unless said otherwise). Use Open, which guards it.
	New    func(clock budget.Clock) budget.Budget
	Timing Timing
	// WallClock: the budget reads time.Now itself. Checks run inside a
	// testing/synctest bubble, clock steps also sleep, and no step goes
	// backwards or jumps centuries (the bubble's timers would overflow).
	WallClock bool
	// Watchdog bounds each piece of a check; zero means 60 s.
	Watchdog time.Duration
}

// Open builds a budget on clock and returns it with the function that
// closes it (a no-op for a budget without a Close() error method). A
// factory that panics, returns nil, or calls t.FailNow panics with a *Fault
// naming that cause, which Catch and Guard report. The factory runs on a
// goroutine of its own, so that a t.FailNow in it ends that goroutine and
// nothing else: a runtime.Goexit cannot be stopped once it has begun.
func (s Subject[S]) Open(clock budget.Clock) (budget.Budget, func()) {
	type built struct {
		b     budget.Budget
		fault *Fault
	}
	ch := make(chan built, 1)
	go func() {
		done := false
		defer func() {
			if done {
				return
			}
			if p := recover(); p != nil {
				ch <- built{fault: factoryFault(p)}
				return
			}
			ch <- built{fault: &Fault{Cause: FactoryExited}}
		}()
		b := s.New(clock)
		done = true
		ch <- built{b: b}
	}()
	r := <-ch
	switch {
	case r.fault != nil:
		panic(r.fault)
	case r.b == nil:
		panic(&Fault{Cause: FactoryNil})
	}
	return r.b, func() { Close(r.b) }
}

// Build is Open on the calling goroutine, for a controlled run: the
// goroutines the factory starts are then started under control. A
// factory that panics or returns nil gives a *Fault instead of a budget;
// one that calls runtime.Goexit ends the calling goroutine, as it would
// end any goroutine.
func (s Subject[S]) Build(clock budget.Clock) (b budget.Budget, closeBudget func(), err error) {
	done := false
	defer func() {
		if done {
			return
		}
		if p := recover(); p != nil {
			err = factoryFault(p)
		}
	}()
	b = s.New(clock)
	done = true
	if b == nil {
		return nil, nil, &Fault{Cause: FactoryNil}
	}
	return b, func() { Close(b) }, nil
}

// factoryFault is the Fault of a factory that panicked with p, read while
// the panicking stack is still there.
func factoryFault(p any) *Fault {
	if f, ok := p.(*Fault); ok {
		return f
	}
	return &Fault{Cause: FactoryPanicked, Value: p, Stack: string(debug.Stack())}
}

// Close closes b if it has a Close() error method. A panic in Close
// panics with a MethodPanicked Fault; an error is ignored, since a budget
// that fails to close has still been used correctly.
func Close(b budget.Budget) {
	c, ok := b.(interface{ Close() error })
	if !ok {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			panic(&Fault{Cause: MethodPanicked, Method: "Close", Value: p, Stack: string(debug.Stack())})
		}
	}()
	c.Close()
}

// Advance moves clock by d for this subject: the ManualClock's Advance, and
// for a budget on the wall clock also a sleep of d inside the bubble.
func (s Subject[S]) Advance(clock *budget.ManualClock, d time.Duration) {
	clock.Advance(d)
	if s.WallClock && d > 0 {
		time.Sleep(d)
	}
}

// InBubble runs f in a testing/synctest bubble for a wall-clock subject, and
// directly otherwise. A panic in f, or a goroutine left blocked in the
// bubble, is returned as a *Fault: it never crashes the process.
func (s Subject[S]) InBubble(t *testing.T, during string, f func(t *testing.T) error) error {
	if !s.WallClock {
		var err error
		if p := Catch(during, func() { err = f(t) }); p != nil {
			return p
		}
		return err
	}
	var err error
	p := Catch(during, func() {
		synctest.Test(t, func(t *testing.T) {
			if p := Catch(during, func() { err = f(t) }); p != nil {
				err = p
			}
		})
	})
	if p != nil {
		return p
	}
	return err
}

// Guard runs f under the subject's watchdog: see Guard.
func (s Subject[S]) Guard(during string, f func() error) error {
	return Guard(during, s.Watchdog, f)
}

// Balance returns, if the model reports a balance (model.Balanced) and the
// budget b has an Available() float64 method, a function that compares the
// two for a model state, to a thousandth (see withinMilli): the model
// counts whole milli-units and keeps the fraction of a continuous refill
// apart, so a budget that keeps floats reads up to a milli-unit above it
// (8.0005 for the model's 8.000), or a hair below through float rounding,
// and passes; one that gains or loses a whole milli-unit (8.001, 7.999)
// does not. It returns nil when there is nothing to compare.
func (s Subject[S]) Balance(b budget.Budget) func(S) error {
	bm, ok := s.Model.(model.Balanced[S])
	if !ok {
		return nil
	}
	av, ok := b.(interface{ Available() float64 })
	if !ok {
		return nil
	}
	return func(state S) error {
		got, want := av.Available(), bm.Balance(state)
		if !withinMilli(got, want) {
			return fmt.Errorf("Available() = %v, want %v (to a thousandth: from %v up to, not including, %v)", got, float64(want)/1000, float64(want)/1000, float64(want+1)/1000)
		}
		return nil
	}
}

// withinMilli reports whether got, a balance in units, is the model's
// balance want, in milli-units, to a thousandth: got × 1000 is in
// [want, want+1), the model's whole milli-units and a fraction of one, give
// or take float rounding. The rounding allowed is far below a milli-unit:
// a millionth of one below want (a float that drifted under an exact
// value), and a billionth short of want+1, so that a budget of integer
// milli-units with one too many, k/1000 for k = want+1, still differs; both
// grow with the balance's magnitude, as a float64's precision falls.
func withinMilli(got float64, want int64) bool {
	d := got*1000 - float64(want)
	scale := 1e-12 * math.Abs(float64(want))
	return d > -(1e-6+scale) && d < 1-(1e-9+scale)
}

// InitAt returns the model's state for a budget built on a clock reading
// now, and whether the model can say (model.Starter).
func (s Subject[S]) InitAt(now time.Duration) (S, bool) {
	if st, ok := s.Model.(model.Starter[S]); ok {
		return st.InitAt(now), true
	}
	return s.Model.Init(), now == 0
}

// Perform calls the budget method that op names (Request, Retry, Success,
// or for a budget.InFlightBudget AttemptEnd and CallEnd) and returns
// Retry's answer; it does nothing for the operations that are not calls of
// the budget (Advance, Reset, and the ends on a budget that is not told of
// them) and returns false. A panic in the method panics again as a
// MethodPanicked *Fault that names the method and op.
func Perform(b budget.Budget, op model.Op) (granted bool) {
	defer func() {
		returned.Add(1)
		if p := recover(); p != nil {
			if f, ok := p.(*Fault); ok {
				panic(f)
			}
			method := map[model.OpKind]string{model.Request: "Request", model.Retry: "Retry", model.Success: "Success",
				model.AttemptEnd: "AttemptEnd", model.CallEnd: "CallEnd"}[op.Op]
			panic(&Fault{Cause: MethodPanicked, Method: method, Op: op, Value: p, Stack: string(debug.Stack())})
		}
	}()
	switch op.Op {
	case model.Request:
		b.Request()
	case model.Retry:
		return b.Retry(budget.Kind(op.Kind))
	case model.Success:
		b.Success(budget.Kind(op.Kind))
	case model.AttemptEnd:
		if ib, ok := b.(budget.InFlightBudget); ok {
			ib.AttemptEnd(budget.Kind(op.Kind))
		}
	case model.CallEnd:
		if ib, ok := b.(budget.InFlightBudget); ok {
			ib.CallEnd()
		}
	}
	return false
}

// Guarded wraps b so that each of its methods panics as Perform does: for
// handing a budget to code that calls it directly, such as a retry loop.
// The wrapper is a budget.InFlightBudget when b is one.
func Guarded(b budget.Budget) budget.Budget {
	if _, ok := b.(budget.InFlightBudget); ok {
		return guardedInFlight{guarded{b}}
	}
	return guarded{b}
}

type guarded struct{ b budget.Budget }

type guardedInFlight struct{ guarded }

func (g guardedInFlight) AttemptEnd(k budget.Kind) { Perform(g.b, model.OpAttemptEnd(model.Kind(k))) }
func (g guardedInFlight) CallEnd()                 { Perform(g.b, model.OpCallEnd) }

func (g guarded) Request()                 { Perform(g.b, model.OpRequest) }
func (g guarded) Retry(k budget.Kind) bool { return Perform(g.b, model.OpRetry(model.Kind(k))) }
func (g guarded) Success(k budget.Kind)    { Perform(g.b, model.OpSuccess(model.Kind(k))) }

// ChildEnv returns the environment for a child process of a test: this
// process's, with the race detector told not to wait its default second at
// exit (GORACE atexit_sleep_ms=0), which would otherwise dominate the time
// of short children under -race.
func ChildEnv() []string {
	env := os.Environ()
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GORACE="); ok {
			env[i] = "GORACE=" + strings.TrimSpace(v+" atexit_sleep_ms=0")
			return env
		}
	}
	return append(env, "GORACE=atexit_sleep_ms=0")
}

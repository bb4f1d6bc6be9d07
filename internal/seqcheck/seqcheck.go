// Package seqcheck drives a budget and its sequential model with the same
// random operations under rapid and fails on the first output that differs.
//
// It is the sequential check of the harness: it catches wrong arithmetic,
// off-by-one thresholds and missing clamps, and rapid shrinks what it finds to
// a short sequence of operations.
package seqcheck

import (
	"strings"
	"sync/atomic"
	"time"

	"pgregory.net/rapid"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

// Timing tells the operation generator what durations matter to a budget.
type Timing struct {
	// Scale is the duration around which behaviour changes: a slot width,
	// or the time a refill takes to pay for one retry. Zero means the
	// budget ignores time, and no Advance operations are generated.
	Scale time.Duration
	// Horizon is the longest duration that still matters: a window, or the
	// time to refill an empty bucket. Zero means 100 × Scale.
	Horizon time.Duration
	// Forward draws no backward clock steps and no jumps of centuries:
	// for budgets on the wall clock of a testing/synctest bubble, whose
	// time cannot go back and whose timers overflow past 2262.
	Forward bool
}

// Op draws one operation. With a zero Timing it draws no Advance.
func Op(t *rapid.T, tm Timing) model.Op {
	kinds := []model.OpKind{model.Request, model.Retry, model.Retry, model.Success}
	if tm.Scale > 0 {
		kinds = append(kinds, model.Advance)
	}
	switch rapid.SampledFrom(kinds).Draw(t, "op") {
	case model.Request:
		return model.OpRequest
	case model.Retry:
		return model.OpRetry(drawKind(t))
	case model.Success:
		return model.OpSuccess(drawKind(t))
	}
	return model.OpAdvance(Duration(t, tm))
}

// drawKind draws mostly retry kinds, sometimes FirstAttempt, and rarely a
// kind that no caller should pass.
func drawKind(t *rapid.T) model.Kind {
	return rapid.SampledFrom([]model.Kind{
		model.FirstAttempt, model.Transient, model.Transient, model.Throttled, model.Throttled, model.Kind(7),
	}).Draw(t, "kind")
}

// Duration draws a clock step: nothing, a fraction of the scale, about one
// scale, up to the horizon, far past it, or backwards.
func Duration(t *rapid.T, tm Timing) time.Duration {
	scale := int64(tm.Scale)
	horizon := int64(tm.Horizon)
	if horizon <= 0 {
		horizon = 100 * scale
	}
	switch rapid.IntRange(0, 9).Draw(t, "step") {
	case 0:
		return 0
	case 1, 2:
		return time.Duration(rapid.Int64Range(1, max(scale/2, 1)).Draw(t, "fraction"))
	case 3, 4:
		return time.Duration(rapid.Int64Range(max(scale-1, 1), scale+1).Draw(t, "scale"))
	case 5, 6:
		return time.Duration(rapid.Int64Range(1, horizon).Draw(t, "horizon"))
	case 7:
		if tm.Forward {
			// The wall clock of a testing/synctest bubble cannot jump
			// centuries: its timers overflow.
			return time.Duration(rapid.Int64Range(horizon, 100*horizon).Draw(t, "far"))
		}
		return time.Duration(rapid.Int64Range(horizon, 1<<62).Draw(t, "far"))
	}
	if tm.Forward {
		return time.Duration(rapid.Int64Range(1, horizon).Draw(t, "forward"))
	}
	switch {
	default:
		return -time.Duration(rapid.Int64Range(1, horizon).Draw(t, "back"))
	}
}

// Stats counts the answers a check saw, so that a test can show it reached
// both sides of every threshold. It is safe for concurrent use.
type Stats struct {
	Granted, Denied atomic.Int64
}

// A Subject couples a budget under test with the model it claims to follow.
type Subject[S any] struct {
	Model model.Model[S]
	// New builds the budget on clock, which reads 0.
	New func(clock budget.Clock) budget.Budget
	// Timing says which clock steps matter; zero for a budget that
	// ignores time.
	Timing Timing
	// Advance, if set, moves time by d instead of clock.Advance(d). A
	// budget that reads the wall clock itself runs inside a
	// testing/synctest bubble, and Advance sleeps there.
	Advance func(clock *budget.ManualClock, d time.Duration)
	// Balance, if set, returns the balance the model holds in s as of its
	// clock's reading, in milli-tokens. The budget must then have an
	// Available() float64 method, and the check compares the two after
	// every operation, which catches state that has gone wrong before any
	// answer shows it.
	Balance func(s S) int64
}

// Check runs one rapid state machine: it builds the subject's budget on a
// ManualClock reading 0, applies the same random operations to it and to the
// model, and fails as soon as a Retry's answer (or the balance) differs.
// Besides single operations it applies bursts of one operation repeated up
// to 64 times, which drive a budget from full to empty within one test case,
// and trickles: up to 64 small clock steps each followed by an operation,
// which make fixed-point fractions add up. stats may be nil.
func Check[S any](t *rapid.T, sub Subject[S], stats *Stats) {
	clock := new(budget.ManualClock)
	b := sub.New(clock)
	m := sub.Model
	state := m.Init()
	var history []string
	fail := func(t *rapid.T, format string, args ...any) {
		t.Fatalf(format+"\nhistory:\n  %s", append(args, strings.Join(history, "\n  "))...)
	}
	step := func(t *rapid.T, op model.Op) {
		var want bool
		before := m.DescribeState(state)
		state, want = m.Step(state, op)
		got := sub.apply(b, clock, op)
		history = append(history, model.Describe(op, got))
		if got != want {
			fail(t, "%v = %v, want %v (model state before: %s)", op, verdict(got), verdict(want), before)
		}
		if sub.Balance != nil {
			av, ok := b.(interface{ Available() float64 })
			if !ok {
				t.Fatalf("%T has no Available() float64 method, and the subject compares balances", b)
			}
			got, want := av.Available(), float64(sub.Balance(state))/1000
			if got != want {
				fail(t, "after %v: Available() = %v, want %v (model state: %s)", op, got, want, m.DescribeState(state))
			}
		}
		if stats != nil && op.Op == model.Retry && op.Kind.IsRetry() {
			if got {
				stats.Granted.Add(1)
			} else {
				stats.Denied.Add(1)
			}
		}
	}
	t.Repeat(map[string]func(*rapid.T){
		"": func(t *rapid.T) {},
		"step": func(t *rapid.T) {
			step(t, Op(t, sub.Timing))
		},
		"burst": func(t *rapid.T) {
			op := Op(t, sub.Timing)
			n := rapid.IntRange(2, 64).Draw(t, "times")
			for range n {
				step(t, op)
			}
		},
		"trickle": func(t *rapid.T) {
			if sub.Timing.Scale == 0 {
				t.Skip("the budget ignores time")
			}
			d := time.Duration(rapid.Int64Range(1, max(int64(sub.Timing.Scale)/3, 1)).Draw(t, "tick"))
			op := Op(t, Timing{})
			n := rapid.IntRange(2, 64).Draw(t, "times")
			for range n {
				step(t, model.OpAdvance(d))
				step(t, op)
			}
		},
	})
}

func (sub Subject[S]) apply(b budget.Budget, clock *budget.ManualClock, op model.Op) bool {
	if op.Op == model.Advance && sub.Advance != nil {
		sub.Advance(clock, op.D)
		return false
	}
	return Apply(b, clock, op)
}

// Apply performs op on b and its clock and returns Retry's answer.
func Apply(b budget.Budget, clock *budget.ManualClock, op model.Op) bool {
	if op.Op == model.Advance {
		clock.Advance(op.D)
		return false
	}
	return linearizability.Perform(b, op)
}

func verdict(granted bool) string {
	if granted {
		return "granted"
	}
	return "denied"
}

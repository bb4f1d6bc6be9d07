// Package seqcheck drives a budget and its sequential model with the same
// random operations under rapid and fails on the first output that differs.
//
// It is the sequential check of the harness: it catches wrong arithmetic,
// off-by-one thresholds and missing clamps, and rapid shrinks what it finds to
// a short sequence of operations.
package seqcheck

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"pgregory.net/rapid"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/model"
)

// Timing says which clock steps matter; see harness.Timing.
type Timing = harness.Timing

// Stats counts the answers a check saw, so that a test can show it reached
// both sides of every threshold, and keeps the last fault (a panic in the
// budget) any test case met. It is safe for concurrent use.
type Stats struct {
	Granted, Denied atomic.Int64
	fault           atomic.Pointer[harness.Fault]
}

// Fault returns the last fault a test case met (rapid runs the shrunk case last), or nil.
func (s *Stats) Fault() *harness.Fault { return s.fault.Load() }

// A Subject is a budget under test; see harness.Subject.
type Subject[S any] = harness.Subject[S]

// Check runs one rapid state machine: it builds the subject's budget on a
// ManualClock reading 0, applies the same random operations to it and to the
// model, and fails as soon as a Retry's answer differs, or the balance,
// when the model reports one (model.Balanced) and the budget has an
// Available() float64 method. Besides single operations it applies bursts
// of one operation repeated up to 64 times, which drive a budget from full
// to empty within one test case, and trickles: up to 64 small clock steps
// each followed by an operation, which make fixed-point fractions add up.
// A panic in the budget fails the test case and is kept in stats, which
// may be nil. The budget is closed at the end of each test case.
func Check[S any](t *rapid.T, sub Subject[S], stats *Stats) {
	clock := new(budget.ManualClock)
	b, closeBudget := sub.Open(clock)
	defer closeBudget()
	m := sub.Model
	state := m.Init()
	balance := sub.Balance(b)
	var history []string
	fail := func(t *rapid.T, format string, args ...any) {
		t.Fatalf(format+"\nhistory:\n  %s", append(args, strings.Join(Fold(history), "\n  "))...)
	}
	apply := func(t *rapid.T, op model.Op) (got bool) {
		if err := harness.Catch("the sequential check", func() { got = apply(sub, b, clock, op) }); err != nil {
			if f, ok := err.(*harness.Fault); ok && stats != nil {
				stats.fault.Store(f) // the last: rapid ends on the shrunk case
			}
			history = append(history, op.String()+" -> panicked")
			fail(t, "%v", err)
		}
		return got
	}
	step := func(t *rapid.T, op model.Op) bool {
		var want bool
		before := m.DescribeState(state)
		state, want = m.Step(state, op)
		got := apply(t, op)
		history = append(history, model.Describe(op, got))
		if got != want {
			fail(t, "%v = %v, want %v (model state before: %s)", op, verdict(got), verdict(want), before)
		}
		if balance != nil {
			if err := balance(state); err != nil {
				fail(t, "after %v: %v (model state: %s)", op, err, m.DescribeState(state))
			}
		}
		if stats != nil && op.Op == model.Retry && op.Kind.IsRetry() {
			if got {
				stats.Granted.Add(1)
			} else {
				stats.Denied.Add(1)
			}
		}
		return got
	}
	if harness.IsStructured(m) {
		t.Repeat(structured(sub.Timing, clock, step))
		return
	}
	t.Repeat(map[string]func(*rapid.T){
		"": func(t *rapid.T) {},
		"step": func(t *rapid.T) {
			step(t, harness.Op(harness.Rapid(t), sub.Timing, clock.Now()))
		},
		"burst": func(t *rapid.T) {
			op := harness.Op(harness.Rapid(t), sub.Timing, clock.Now())
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
			op := harness.Call(harness.Rapid(t))
			n := rapid.IntRange(2, 64).Draw(t, "times")
			for range n {
				step(t, model.OpAdvance(d))
				step(t, op)
			}
		},
	})
}

// maxCallers is how many calls a structured check keeps in flight at most.
const maxCallers = 48

// structured returns the actions of the state machine for a structured
// model: every operation is made by one of up to maxCallers callers, each
// keeping the call structure (harness.Caller), so that many calls and
// retries are in flight at once. Besides single operations: a burst of new
// calls whose first attempts fail, a burst of retries from every caller
// whose attempt failed, and a drain that ends every attempt and call in
// flight. step applies an operation to the budget and the model and
// returns the answer.
func structured(tm Timing, clock *budget.ManualClock, step func(*rapid.T, model.Op) bool) map[string]func(*rapid.T) {
	var callers []harness.Caller
	do := func(t *rapid.T, i int, op model.Op) {
		callers[i].Answer(op, step(t, op))
	}
	// caller returns a caller that is in a call, or a new one.
	caller := func(t *rapid.T) int {
		for len(callers) > 0 && !callers[len(callers)-1].InCall() {
			callers = callers[:len(callers)-1]
		}
		i := rapid.IntRange(0, min(len(callers), maxCallers-1)).Draw(t, "caller")
		if i == len(callers) {
			callers = append(callers, harness.Caller{})
		}
		return i
	}
	return map[string]func(*rapid.T){
		"": func(t *rapid.T) {},
		"step": func(t *rapid.T) {
			if tm.Scale > 0 && rapid.IntRange(0, 4).Draw(t, "clock") == 0 {
				step(t, model.OpAdvance(harness.Step(harness.Rapid(t), tm, clock.Now())))
				return
			}
			i := caller(t)
			do(t, i, callers[i].Next(harness.Rapid(t)))
		},
		"calls": func(t *rapid.T) {
			n := rapid.IntRange(2, 32).Draw(t, "calls")
			for range min(n, maxCallers-len(callers)) {
				callers = append(callers, harness.Caller{})
				for _, op := range callers[len(callers)-1].StartFailed() {
					step(t, op)
				}
			}
		},
		"retries": func(t *rapid.T) {
			for i := range callers {
				if callers[i].Failed() {
					do(t, i, callers[i].Next(harness.Rapid(t)))
				}
			}
		},
		"drain": func(t *rapid.T) {
			for i := range callers {
				for callers[i].InCall() {
					do(t, i, callers[i].Next(harness.Rapid(t)))
				}
			}
		},
	}
}

func apply[S any](sub Subject[S], b budget.Budget, clock *budget.ManualClock, op model.Op) bool {
	if op.Op == model.Advance {
		sub.Advance(clock, op.D)
		return false
	}
	return harness.Perform(b, op)
}

func verdict(granted bool) string {
	if granted {
		return "granted"
	}
	return "denied"
}

// Fold folds each run of three or more equal lines of a history into one,
// "advance(1s) ×65", so that a shrunk history a person reads shows what
// changes, not how often.
func Fold(lines []string) []string {
	var out []string
	for i := 0; i < len(lines); {
		j := i + 1
		for j < len(lines) && lines[j] == lines[i] {
			j++
		}
		if j-i > 2 {
			out = append(out, fmt.Sprintf("%s ×%d", lines[i], j-i))
		} else {
			out = append(out, lines[i:j]...)
		}
		i = j
	}
	return out
}

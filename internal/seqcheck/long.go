package seqcheck

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/model"
)

// A Divergence is where a long run's budget first answered otherwise than
// its model: Ops, the operations from a new budget up to and including the
// one that differed, shrunk as far as Shrink could within its time.
type Divergence struct {
	Ops    []model.Op
	Detail string // what differed, at the last of Ops
	Phases string // the run that found it, before shrinking: its phases
	From   int    // the length of the run's prefix up to the divergence
}

func (d *Divergence) Error() string {
	return fmt.Sprintf("%s, after %d operations (shrunk from %d, the run of %s):\n  %s",
		d.Detail, len(d.Ops), d.From, d.Phases, Compact(d.Ops))
}

// Long runs one long sequential run of about n operations from seed on a
// new budget and on the model, comparing every answer and, when both
// report one, the balance after every operation. The run is a chain of
// phases of up to 200 operations (see phase): random mixes of every kind,
// and calls with a share of retries drawn from none (steady success) to all
// (an outage), which ask for a retry at every edge of the model, where one
// more success or small clock step would change its answer. A model of
// structured calls (model.Structured) gets callers that keep the call
// structure instead. It returns the first difference, or nil; its Ops are
// not yet shrunk (see Shrink).
func Long[S any](sub Subject[S], seed uint64, n int) *Divergence {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	src := harness.Rand(r)
	var ops []model.Op
	var phases []string
	run := newLongRun(sub)
	defer run.close()
	do := func(op model.Op) bool {
		ops = append(ops, op)
		return run.step(op)
	}
	for len(ops) < n && run.err == "" {
		if harness.IsStructured(sub.Model) {
			phases = append(phases, "calls")
			structuredPhase(src, 500+r.IntN(2000), do)
			continue
		}
		phases = append(phases, phase(src, sub.Timing, run, 1+r.IntN(200), do))
	}
	if run.err == "" {
		return nil
	}
	return &Divergence{Ops: ops, Detail: run.err, Phases: describePhases(phases), From: len(ops)}
}

// ReplayOps reports whether ops, applied to a new budget and to the model,
// give a different answer or balance at their last operation or before it,
// and what differed first.
func ReplayOps[S any](sub Subject[S], ops []model.Op) (string, bool) {
	run := newLongRun(sub)
	defer run.close()
	for _, op := range ops {
		if !run.ok() {
			break
		}
		run.step(op)
	}
	return run.err, run.err != ""
}

// Shrink removes operations from d.Ops, for at most within, while the
// budget still parts from the model: runs of operations, halving their
// length down to one; then it makes each operation that differs from the
// one before it the same as that one where it can, so that the sequence
// reads as a few runs. Each try replays from a new budget.
func Shrink[S any](sub Subject[S], d *Divergence, within time.Duration) {
	deadline := time.Now().Add(within)
	cur := d.Ops
	detail := d.Detail
	try := func(cand []model.Op) bool {
		why, bad := ReplayOps(sub, cand)
		if !bad {
			return false
		}
		// The difference may come earlier now: keep the prefix up to it.
		cur, detail = cand[:firstDifference(sub, cand)], why
		return true
	}
	for changed := true; changed && time.Now().Before(deadline); {
		changed = false
		for size := len(cur) / 2; size >= 1 && time.Now().Before(deadline); {
			removed := false
			for at := 0; at+size <= len(cur) && time.Now().Before(deadline); {
				cand := append(append(make([]model.Op, 0, len(cur)-size), cur[:at]...), cur[at+size:]...)
				if len(cand) > 0 && try(cand) {
					removed, changed = true, true
					continue // the same place, with what followed it
				}
				at += size
			}
			if !removed {
				size /= 2
			}
		}
		for i := 1; i < len(cur) && time.Now().Before(deadline); i++ {
			if cur[i] == cur[i-1] || cur[i].Op == model.Retry && cur[i-1].Op != model.Retry {
				continue
			}
			cand := slices.Clone(cur)
			cand[i] = cur[i-1]
			if try(cand) {
				changed = true
			}
		}
	}
	d.Ops, d.Detail = cur, detail
}

// firstDifference returns the length of the prefix of ops up to and
// including the first operation after which the budget and the model
// differ; len(ops) if none does.
func firstDifference[S any](sub Subject[S], ops []model.Op) int {
	run := newLongRun(sub)
	defer run.close()
	for i, op := range ops {
		run.step(op)
		if !run.ok() {
			return i + 1
		}
	}
	return len(ops)
}

// A longRun steps one budget and the model.
type longRun[S any] struct {
	sub     Subject[S]
	b       budget.Budget
	closeB  func()
	clock   *budget.ManualClock
	state   S
	balance func(S) error
	err     string // the first difference, or a panic
}

func newLongRun[S any](sub Subject[S]) *longRun[S] {
	clock := new(budget.ManualClock)
	b, closeB := sub.Open(clock)
	return &longRun[S]{sub: sub, b: b, closeB: closeB, clock: clock, state: sub.Model.Init(), balance: sub.Balance(b)}
}

func (r *longRun[S]) close() { r.closeB() }

func (r *longRun[S]) ok() bool { return r.err == "" }

func (r *longRun[S]) now() time.Duration { return r.clock.Now() }

// wouldAfter returns the model's answer to op after first, without taking
// either.
func (r *longRun[S]) wouldAfter(first, op model.Op) bool {
	s, _ := r.sub.Model.Step(r.state, first)
	_, granted := r.sub.Model.Step(s, op)
	return granted
}

// would returns the model's answer to op, without taking it.
func (r *longRun[S]) would(op model.Op) bool {
	_, granted := r.sub.Model.Step(r.state, op)
	return granted
}

// step applies op to both, and returns the budget's answer; the first
// difference is kept in err.
func (r *longRun[S]) step(op model.Op) (got bool) {
	if r.err != "" {
		return false
	}
	before := r.state // states are values: described only if op differs
	var want bool
	r.state, want = r.sub.Model.Step(r.state, op)
	if err := harness.Catch("a long sequential run", func() { got = apply(r.sub, r.b, r.clock, op) }); err != nil {
		r.err = fmt.Sprintf("%v panicked: %v", op, err)
		return false
	}
	if got != want {
		r.err = fmt.Sprintf("%v = %v, want %v (model state before: %s)", op, verdict(got), verdict(want), r.sub.Model.DescribeState(before))
		return got
	}
	if r.balance != nil {
		if err := r.balance(r.state); err != nil {
			r.err = fmt.Sprintf("after %v: %v (model state: %s)", op, err, r.sub.Model.DescribeState(r.state))
		}
	}
	return got
}

// retryRates are the shares of retries among the calls of a phase: from
// steady success (none) to an outage (every attempt fails, and its caller
// asks again).
var retryRates = []float64{0, 0.02, 0.05, 0.1, 0.2, 0.5, 0.9, 1}

// edge is what a phase asks of the run: whether the model would grant op
// now, or after first taking another operation; and the clock's reading.
type edge interface {
	would(op model.Op) bool
	wouldAfter(first, op model.Op) bool
	now() time.Duration
}

// phase makes n operations through do, in one of two kinds of stretch:
// random operations of every kind (harness.Op, clock jumps included), or
// calls with a share of retries drawn from retryRates, mostly successes of
// first attempts otherwise, and small clock steps. In the second kind, at
// every edge of the model (a retry's answer would change after one more
// success, or one more small clock step) a retry is asked for: a budget
// whose arithmetic drifted from the model's answers otherwise there first.
func phase(src harness.Source, tm Timing, r edge, n int, do func(model.Op) bool) string {
	if src.IntN(5, "mixed") == 0 {
		for range n {
			do(harness.Op(src, tm, r.now()))
		}
		return "mixed"
	}
	rate := retryRates[src.IntN(len(retryRates), "rate")]
	small := model.OpAdvance(time.Duration(max(int64(tm.Scale)/64, 1)))
	for range n {
		k := harness.RetryKind(src)
		retry := model.OpRetry(k)
		now := r.would(retry)
		atEdge := now != r.wouldAfter(model.OpSuccess(model.FirstAttempt), retry) ||
			tm.Scale > 0 && now != r.wouldAfter(small, retry)
		switch {
		case atEdge || float64(src.IntN(1000, "retry")) < rate*1000:
			do(retry)
		case src.IntN(8, "request") == 0:
			do(model.OpRequest)
		case src.IntN(4, "kind") == 0:
			do(model.OpSuccess(harness.Kind(src)))
		default:
			do(model.OpSuccess(model.FirstAttempt))
		}
		tick(src, tm, 10, do)
	}
	return fmt.Sprintf("%g%% retries", rate*100)
}

// tick, for a budget whose answers depend on time, moves the clock now and
// then, one time in every: by a small fraction of the scale mostly, which
// makes fixed-point fractions add up, and sometimes by a whole scale.
func tick(src harness.Source, tm Timing, every int, do func(model.Op) bool) {
	if tm.Scale <= 0 || src.IntN(every, "tick") != 0 {
		return
	}
	scale := int64(tm.Scale)
	if src.IntN(8, "whole") == 0 {
		do(model.OpAdvance(time.Duration(scale)))
		return
	}
	do(model.OpAdvance(time.Duration(src.Int64Range(1, max(scale/16, 1), "fraction"))))
}

// structuredPhase makes about n operations of callers that keep the call
// structure, up to maxCallers of them in calls at once.
func structuredPhase(src harness.Source, n int, do func(model.Op) bool) {
	callers := make([]harness.Caller, 1+src.IntN(maxCallers, "callers"))
	for range n {
		c := &callers[src.IntN(len(callers), "caller")]
		op := c.Next(src)
		c.Answer(op, do(op))
	}
	for i := range callers {
		for callers[i].InCall() {
			op := callers[i].Next(src)
			callers[i].Answer(op, do(op))
		}
	}
}

// Compact writes ops as runs: "success(first) ×124, retry(transient)".
func Compact(ops []model.Op) string {
	var parts []string
	for i := 0; i < len(ops); {
		j := i + 1
		for j < len(ops) && ops[j] == ops[i] {
			j++
		}
		if j-i > 1 {
			parts = append(parts, fmt.Sprintf("%v ×%d", ops[i], j-i))
		} else {
			parts = append(parts, ops[i].String())
		}
		i = j
	}
	return strings.Join(parts, ", ")
}

// describePhases counts a run's phases by kind, and names the one it
// ended in: "212 phases (mixed 40, 0% retries 22, …), the last 10% retries".
func describePhases(names []string) string {
	count := map[string]int{}
	var order []string
	for _, n := range names {
		if count[n] == 0 {
			order = append(order, n)
		}
		count[n]++
	}
	parts := make([]string, len(order))
	for i, n := range order {
		parts[i] = fmt.Sprintf("%s %d", n, count[n])
	}
	return fmt.Sprintf("%d phases (%s), the last %s", len(names), strings.Join(parts, ", "), names[len(names)-1])
}

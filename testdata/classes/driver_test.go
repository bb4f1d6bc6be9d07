package classes

import (
	"math"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// A driver runs operations on a budget and keeps what they answered, so
// that a test can force one interleaving through testHook and then show
// that no order of the calls explains what the budget did (or, for an
// interleaving that must be harmless, that one does).
type driver[S any] struct {
	t     *testing.T
	m     model.Model[S]
	b     budget.Budget
	clock *budget.ManualClock

	s S // the model's state after the sequential prefix

	// The racing part: inner calls ran, in this order, inside outer's call.
	raced bool
	outer call
	inner []call
	post  []call
}

type call struct {
	op      model.Op
	granted bool
}

func (c call) String() string { return model.Describe(c.op, c.granted) }

func newDriver[S any](t *testing.T, m model.Model[S], build func(budget.Clock) budget.Budget) *driver[S] {
	clock := new(budget.ManualClock)
	return &driver[S]{t: t, m: m, b: build(clock), clock: clock, s: m.Init()}
}

// apply runs op on the budget (or its clock) and returns its answer.
func (d *driver[S]) apply(op model.Op) bool {
	return applyOp(d.t, d.b, d.clock, op)
}

func applyOp(t *testing.T, b budget.Budget, clock *budget.ManualClock, op model.Op) bool {
	k := budget.Kind(op.Kind)
	switch op.Op {
	case model.Request:
		b.Request()
	case model.Retry:
		return b.Retry(k)
	case model.Success:
		b.Success(k)
	case model.Advance:
		clock.Advance(op.D)
	case model.AttemptEnd:
		b.(budget.InFlightBudget).AttemptEnd(k)
	case model.CallEnd:
		b.(budget.InFlightBudget).CallEnd()
	default:
		t.Fatalf("unexpected operation %v", op)
	}
	return false
}

// seq runs ops one at a time on the budget and on the model, before the
// race, and fails on any answer that differs.
func (d *driver[S]) seq(ops ...model.Op) {
	d.t.Helper()
	for _, op := range ops {
		got := d.apply(op)
		var want bool
		d.s, want = d.m.Step(d.s, op)
		if got != want {
			d.t.Fatalf("sequential %v answered %v, the model %v", op, got, want)
		}
	}
}

// race runs outer on the budget and, when outer reaches point, runs inner,
// one after the other, on the same goroutine: the interleaving in which
// another goroutine's calls run at exactly that point of outer's.
func (d *driver[S]) race(point string, outer model.Op, inner ...model.Op) {
	d.t.Helper()
	fired := false
	testHook = func(p string) {
		if p != point || fired {
			return
		}
		fired = true
		for _, op := range inner {
			d.inner = append(d.inner, call{op, d.apply(op)})
		}
	}
	defer func() { testHook = nil }()
	d.outer = call{outer, d.apply(outer)}
	if !fired {
		d.t.Fatalf("%v never reached %q", outer, point)
	}
	d.raced = true
}

// after runs ops on the budget after the race, one at a time.
func (d *driver[S]) after(ops ...model.Op) []bool {
	var out []bool
	for _, op := range ops {
		c := call{op, d.apply(op)}
		d.post = append(d.post, c)
		out = append(out, c.granted)
	}
	return out
}

// balance returns the budget's balance in milli-units.
func (d *driver[S]) balance() int64 {
	return int64(math.Round(d.b.(budget.Balancer).Available() * milli))
}

// explanation returns an order of the raced calls that explains every
// answer the budget gave and its final balance, if there is one. outer
// overlapped every inner call, so it may be ordered anywhere among them;
// the inner calls ran one after the other, and the calls after the race
// came after all of them.
func (d *driver[S]) explanation() ([]call, bool) {
	d.t.Helper()
	if !d.raced {
		d.t.Fatal("no race to explain")
	}
	bal := d.balance()
	for pos := 0; pos <= len(d.inner); pos++ {
		order := append(append(append([]call{}, d.inner[:pos]...), d.outer), d.inner[pos:]...)
		order = append(order, d.post...)
		s, ok := d.s, true
		for _, c := range order {
			var g bool
			s, g = d.m.Step(s, c.op)
			if c.op.Op == model.Retry && g != c.granted {
				ok = false
			}
		}
		if mb, isB := d.m.(model.Balanced[S]); isB && mb.Balance(s) != bal {
			ok = false
		}
		if ok {
			return order, true
		}
	}
	return nil, false
}

// refute fails the test unless no order of the raced calls explains what
// the budget did.
func (d *driver[S]) refute() {
	d.t.Helper()
	if order, ok := d.explanation(); ok {
		d.t.Fatalf("the order %v explains what the budget did: no bug shown", order)
	}
	d.t.Logf("outer %v, inner %v, after %v, balance %.3f: no order of the calls explains it", d.outer, d.inner, d.post, float64(d.balance())/milli)
}

// explained fails the test unless some order of the raced calls explains
// what the budget did: the interleaving was harmless.
func (d *driver[S]) explained() {
	d.t.Helper()
	order, ok := d.explanation()
	if !ok {
		d.t.Fatalf("outer %v, inner %v, after %v, balance %.3f: no order explains it, but this interleaving should be harmless", d.outer, d.inner, d.post, float64(d.balance())/milli)
	}
	d.t.Logf("harmless: inner %v explained by the order %v", d.inner, order)
}

func repeat(n int, op model.Op) []model.Op {
	ops := make([]model.Op, n)
	for i := range ops {
		ops[i] = op
	}
	return ops
}

func concat(parts ...[]model.Op) []model.Op {
	var out []model.Op
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var (
	retryT   = model.OpRetry(model.Transient)
	retryTh  = model.OpRetry(model.Throttled)
	retry1st = model.OpRetry(model.FirstAttempt)
	succ1st  = model.OpSuccess(model.FirstAttempt)
	succT    = model.OpSuccess(model.Transient)
	succTh   = model.OpSuccess(model.Throttled)
	endT     = model.OpAttemptEnd(model.Transient)
	end1st   = model.OpAttemptEnd(model.FirstAttempt)
	request  = model.OpRequest
	callEnd  = model.OpCallEnd
	advance  = model.OpAdvance
)

package wild

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// These tests show, without the suite, that every case is a real bug: each
// drives a budget and its model's Step side by side and finds an answer or
// a balance the model does not give. Sequential bugs are shown by one
// sequence of operations; concurrency bugs by two overlapping calls forced
// into the bad interleaving through preemptHook, whose outcome matches
// neither order the model allows.

type balanced interface{ Available() float64 }

// divergence is where a budget first departs from its model.
type divergence struct {
	first, answer string // the first difference of any kind, and the first in an answer
}

// drive applies ops to a budget built on a manual clock reading start and to
// the model, and reports where they first differ.
func drive[S any](m model.Model[S], build func(budget.Clock) budget.Budget, start time.Duration, ops []model.Op) divergence {
	clock := new(budget.ManualClock)
	clock.Set(start)
	b := build(clock)
	s := m.Init()
	if st, ok := m.(model.Starter[S]); ok {
		s = st.InitAt(start)
	}
	bal, hasBal := m.(model.Balanced[S])
	av, hasAv := b.(balanced)
	var d divergence
	for i, op := range ops {
		got := apply(b, clock, op)
		var want bool
		s, want = m.Step(s, op)
		if got != want && d.answer == "" {
			d.answer = fmt.Sprintf("op %d %s: budget %v, model %v (model state %s)", i, op, got, want, m.DescribeState(s))
			if d.first == "" {
				d.first = d.answer
			}
		}
		if hasBal && hasAv && d.first == "" {
			if a, w := av.Available(), float64(bal.Balance(s))/1000; a != w {
				d.first = fmt.Sprintf("op %d %s: Available() = %v, model balance %v", i, op, a, w)
			}
		}
	}
	return d
}

func apply(b budget.Budget, clock *budget.ManualClock, op model.Op) bool {
	switch op.Op {
	case model.Request:
		b.Request()
	case model.Retry:
		return b.Retry(budget.Kind(op.Kind))
	case model.Success:
		b.Success(budget.Kind(op.Kind))
	case model.Advance:
		clock.Advance(op.D)
	}
	return false
}

func rep(n int, ops ...model.Op) []model.Op {
	var out []model.Op
	for range n {
		out = append(out, ops...)
	}
	return out
}

func cat(parts ...[]model.Op) []model.Op {
	var out []model.Op
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var (
	req  = model.OpRequest
	tr   = model.OpRetry(model.Transient)
	th   = model.OpRetry(model.Throttled)
	okF  = model.OpSuccess(model.FirstAttempt)
	okTr = model.OpSuccess(model.Transient)
	adv  = model.OpAdvance
)

type seqDemo struct {
	name       string
	wantAnswer bool // the sequence shows a differing answer, not only a balance
	run        func() divergence
}

func seq[S any](m model.Model[S], start time.Duration, ops []model.Op, build func(budget.Clock) budget.Budget) func() divergence {
	return func() divergence { return drive(m, build, start, ops) }
}

func noClock(f func() budget.Budget) func(budget.Clock) budget.Budget {
	return func(budget.Clock) budget.Budget { return f() }
}

func sequentialDemos() []seqDemo {
	p := plainModel
	return []seqDemo{
		{"wild.FloatDriftBucket", true, seq(floatModel, 0, rep(3, tr),
			noClock(func() budget.Budget { return NewFloatDriftBucket(0.3, 0.1, 0.05, 0.01) }))},
		{"wild.TruncatedRefillBucket", true, seq(slowRefill, 0, cat(rep(5, tr), rep(1000, adv(1500*time.Microsecond), th)),
			refilling(slowRefill, func(c, tr, th, b, r int64, k budget.Clock) budget.Budget {
				return NewTruncatedRefillBucket(c, tr, th, b, r, k)
			}))},
		{"wild.RoundedBonusBucket", true, seq(centiModel, 0, cat(rep(6, tr), rep(2, th), rep(40, okF, okF, okF, th)),
			noClock(func() budget.Budget { return NewRoundedBonusBucket(10, 1.5, 0.5, 0.125) }))},
		{"wild.FloatRatio", true, seq(ratio29Model, 0, cat(rep(100, req), rep(29, tr)),
			func(c budget.Clock) budget.Budget { return NewFloatRatio(0.29, 10*time.Second, 10, 3, c) })},
		{"wild.NegativeRefillBucket", true, seq(refillModel, 0, []model.Op{tr, adv(-time.Second), th, th},
			refilling(refillModel, func(c, tr, th, b, r int64, k budget.Clock) budget.Budget {
				return NewNegativeRefillBucket(c, tr, th, b, r, k)
			}))},
		{"wild.RetryOnlyBaseBucket", true, seq(refillModel, 0, []model.Op{tr, tr, adv(time.Second), okF, tr},
			refilling(refillModel, func(c, tr, th, b, r int64, k budget.Clock) budget.Budget {
				return NewRetryOnlyBaseBucket(c, tr, th, b, r, k)
			}))},
		{"wild.OverflowRefillBucket", true, seq(sevenPerSec, 0, []model.Op{tr, tr, tr, adv(16 * 24 * time.Hour), tr},
			refilling(sevenPerSec, func(c, tr, th, b, r int64, k budget.Clock) budget.Budget {
				return NewOverflowRefillBucket(c, tr, th, b, r, k)
			}))},
		{"wild.ResetOnBackwardsRatio", true, seq(sreModel, 0, []model.Op{tr, tr, tr, tr, adv(-1), tr},
			ratio(sreModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewResetOnBackwardsRatio(p, w, s, f, c)
			}))},
		{"wild.SlotBoundaryRatio", true, seq(sreModel, 0, cat([]model.Op{adv(time.Second)}, rep(50, req), []model.Op{adv(9 * time.Second)}, rep(5, tr)),
			ratio(sreModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewSlotBoundaryRatio(p, w, s, f, c)
			}))},
		{"wild.InclusiveWindowRatio", true, seq(sreModel, 0, []model.Op{tr, tr, tr, tr, adv(10 * time.Second), tr},
			ratio(sreModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewInclusiveWindowRatio(p, w, s, f, c)
			}))},
		{"wild.TruncatedSlotRatio", true, seq(sreModel, -1500*time.Millisecond, []model.Op{tr, tr, tr, adv(10 * time.Second), tr},
			ratio(sreModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewTruncatedSlotRatio(p, w, s, f, c)
			}))},
		{"wild.DropBonusAtCapBucket", true, seq(p, 0, []model.Op{th, okTr, tr, th},
			noClock(bucket(p, func(c, tr, th, b int64) budget.Budget { return NewDropBonusAtCapBucket(c, tr, th, b) })))},
		{"wild.ChargeOnDenyBucket", true, seq(p, 0, []model.Op{tr, tr, th},
			noClock(bucket(p, func(c, tr, th, b int64) budget.Budget { return NewChargeOnDenyBucket(c, tr, th, b) })))},
		{"wild.AtHalfThrottle", true, seq(grpcModel, 0, rep(5, tr),
			noClock(func() budget.Budget { return NewAtHalfThrottle(grpcModel.Max, grpcModel.Ratio) }))},
		{"wild.Uint16Ratio", true, seq(sreModel, 0, cat(rep(65536, req), rep(4, tr)),
			ratio(sreModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewUint16Ratio(p, w, s, f, c)
			}))},
		{"wild.Product32Ratio", true, seq(sreModel, 0, cat(rep(42950, req), rep(4, tr)),
			ratio(sreModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewProduct32Ratio(p, w, s, f, c)
			}))},
		{"wild.TickRefillBucket", true, seq(tickModel, 0, cat(rep(5, tr), rep(3000, adv(300*time.Microsecond), okF, th)),
			refilling(tickModel, func(c, tr, th, b, r int64, k budget.Clock) budget.Budget {
				return NewTickRefillBucket(c, tr, th, b, r, k)
			}))},
		{"wild.WholeTokenHalfThrottle", true, seq(sevenModel, 0, cat(rep(4, tr), rep(4, okF), []model.Op{tr}),
			noClock(func() budget.Budget { return NewWholeTokenHalfThrottle(7, 0.3) }))},
		{"wild.RoundedAllowanceRatio", true, seq(sreModel, 0, cat(rep(45, req), rep(5, tr)),
			ratio(sreModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewRoundedAllowanceRatio(p, w, s, f, c)
			}))},
		{"wild.ProportionalSlotRatio", true, seq(thirdsModel, 0, []model.Op{tr, tr, tr, adv(3 * 3_333_333_333), tr},
			ratio(thirdsModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewProportionalSlotRatio(p, w, s, f, c)
			}))},
		{"wild.WholeTokenCostBucket", true, seq(halfCostModel, 0, rep(5, tr),
			noClock(func() budget.Budget { return NewWholeTokenCostBucket(10, 2.5, 1, 0.5) }))},
	}
}

// An overlap is two calls that overlap in time: first is held at its
// preempt point while second runs from start to end. Any linearization puts
// one before the other, so the budget's outcome must equal the model's for
// setup+first+second or setup+second+first.
type overlap struct {
	name          string
	setup         []model.Op
	first, second model.Op
	build         func() budget.Budget
}

func concurrentDemos() []overlap {
	p := plainModel
	b := func(f func(c, tr, th, b int64) budget.Budget) func() budget.Budget { return bucket(p, f) }
	return []overlap{
		{"wild.LostRefundBucket", []model.Op{tr}, okTr, th, b(func(c, tr, th, b int64) budget.Budget { return NewLostRefundBucket(c, tr, th, b) })},
		{"wild.AddThenUndoBucket", []model.Op{th, th}, tr, okTr, b(func(c, tr, th, b int64) budget.Budget { return NewAddThenUndoBucket(c, tr, th, b) })},
		{"wild.CheckThenActBucket", nil, tr, tr, b(func(c, tr, th, b int64) budget.Budget { return NewCheckThenActBucket(c, tr, th, b) })},
		{"wild.WorkerPoolBucket", nil, tr, tr, b(func(c, tr, th, b int64) budget.Budget { return NewWorkerPoolBucket(c, tr, th, b) })},
		{"wild.LostChargeBucket", []model.Op{tr}, okF, th, b(func(c, tr, th, b int64) budget.Budget { return NewLostChargeBucket(c, tr, th, b) })},
		{"wild.SplitLockBucket", nil, tr, tr, b(func(c, tr, th, b int64) budget.Budget { return NewSplitLockBucket(c, tr, th, b) })},
		{"wild.StaleCASThrottle", []model.Op{tr, tr, tr}, tr, tr, func() budget.Budget { return NewStaleCASThrottle(grpcModel.Max, grpcModel.Ratio) }},
		{"wild.UnlockedReadRatio", []model.Op{tr, tr}, tr, tr, func() budget.Budget {
			return NewUnlockedReadRatio(sreModel.PPM, sreModel.Window, sreModel.Slots, sreModel.Floor, new(budget.ManualClock))
		}},
	}
}

// outcome is what two overlapping calls answered and the balance they left.
type outcome struct {
	first, second bool
	balance       string
}

// interleave runs first on a goroutine, holds it at its preempt point, runs
// second to completion, then lets first finish.
func interleave(t *testing.T, first, second func()) {
	t.Helper()
	reached, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	preemptHook = func() {
		held := false
		once.Do(func() { held = true })
		if held {
			close(reached)
			<-release
		}
	}
	defer func() { preemptHook = nil }()
	go func() { defer close(done); first() }()
	select {
	case <-reached:
	case <-done:
		t.Fatal("the first call never reached its preempt point")
	case <-time.After(10 * time.Second):
		t.Fatal("the first call is stuck")
	}
	second()
	close(release)
	<-done
}

// modelOutcomes returns what the model gives for the two orders.
func modelOutcomes[S any](m model.Model[S], setup []model.Op, first, second model.Op) [2]outcome {
	var out [2]outcome
	for i, order := range [2][2]model.Op{{first, second}, {second, first}} {
		s := m.Init()
		for _, op := range setup {
			s, _ = m.Step(s, op)
		}
		var a, b bool
		s, a = m.Step(s, order[0])
		s, b = m.Step(s, order[1])
		if i == 1 {
			a, b = b, a
		}
		out[i] = outcome{first: a, second: b, balance: m.DescribeState(s)}
	}
	return out
}

func TestWildIsABug(t *testing.T) {
	t.Parallel()
	demos := map[string]bool{}
	for _, d := range sequentialDemos() {
		demos[d.name] = true
		t.Run(d.name, func(t *testing.T) {
			got := d.run()
			if got.first == "" {
				t.Fatalf("%s: the budget agrees with its model on the whole sequence", d.name)
			}
			t.Logf("first difference: %s", got.first)
			if got.answer != "" {
				t.Logf("first differing answer: %s", got.answer)
			} else if d.wantAnswer {
				t.Errorf("%s: no answer differs on this sequence, only the balance", d.name)
			}
		})
	}
	for _, o := range concurrentDemos() {
		demos[o.name] = true
		t.Run(o.name, func(t *testing.T) {
			b := o.build()
			clock := new(budget.ManualClock)
			for _, op := range o.setup {
				apply(b, clock, op)
			}
			var got outcome
			interleave(t, func() { got.first = apply(b, clock, o.first) }, func() { got.second = apply(b, clock, o.second) })
			var bal string
			if av, ok := b.(balanced); ok {
				bal = fmt.Sprintf(" Available()=%v", av.Available())
			}
			var want [2]outcome
			var matches func(outcome) bool
			switch o.name {
			case "wild.StaleCASThrottle":
				want = modelOutcomes[model.ThrottleState](grpcModel, o.setup, o.first, o.second)
			case "wild.UnlockedReadRatio":
				want = modelOutcomes[model.RatioState](sreModel, o.setup, o.first, o.second)
			default:
				want = modelOutcomes[model.TokenBucketState](plainModel, o.setup, o.first, o.second)
			}
			// A model outcome matches when both answers are equal and, where
			// the budget reports a balance, the balance is equal too.
			matches = func(w outcome) bool {
				if w.first != got.first || w.second != got.second {
					return false
				}
				if av, ok := b.(balanced); ok {
					return fmt.Sprintf("tokens=%v", av.Available()) == w.balance
				}
				return true
			}
			t.Logf("budget: %s=%v, %s=%v%s", o.first, got.first, o.second, got.second, bal)
			t.Logf("model, first then second: %+v; second then first: %+v", want[0], want[1])
			if matches(want[0]) || matches(want[1]) {
				t.Errorf("%s: the interleaving is explained by a sequential order", o.name)
			}
		})
	}
	for _, c := range Cases() {
		if !demos[c.Name] {
			t.Errorf("%s has no demonstration", c.Name)
		}
	}
}

package budgettest

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// The Edges check starts a budget at zero, just below it, a horizon below
// zero, and near both ends of int64, each a multiple of the scale, and
// walks it across every slot boundary and a nanosecond either side.
func TestEdgesStartsAndWalk(t *testing.T) {
	m := model.SRE() // a model.Starter with a 1 s scale
	sub := Subject[model.RatioState]{Model: m, Scale: time.Second, Horizon: 10 * time.Second,
		New: func(*testing.T, budget.Clock) budget.Budget { return nil }}
	es := sub.edges()
	var starts []time.Duration
	for _, e := range es {
		starts = append(starts, e.start)
	}
	s, h := time.Second, 10*time.Second
	down := func(d time.Duration) time.Duration { return d / s * s }
	want := []time.Duration{0, -s, down(-h - s), down(math.MinInt64) + s, down(math.MaxInt64 - h - s), down(math.MaxInt64 - s)}
	if !slices.Equal(starts, want) {
		t.Fatalf("starts %v, want %v", starts, want)
	}
	walk := es[0].ops
	var steps []time.Duration
	for _, op := range walk {
		if op.Op == model.Advance {
			steps = append(steps, op.D)
		}
	}
	// horizon/scale + 2 slots, each followed by a step of scale-1, scale
	// or scale+1 in turn, then the steps beside a boundary.
	if n := int(h/s) + 2; len(steps) < n {
		t.Fatalf("%d steps, want at least %d", len(steps), n)
	}
	for i := range int(h/s) + 2 {
		if want := s + time.Duration(i%3) - 1; steps[i] != want {
			t.Errorf("step %d = %v, want %v", i, steps[i], want)
		}
	}
	tail := steps[int(h/s)+2:]
	if !slices.Equal(tail, []time.Duration{s - 1, 1, h, -s}) {
		t.Errorf("the last steps %v, want [%v 1ns %v %v]", tail, s-1, h, -s)
	}
	plainSub := Subject[model.ThrottleState]{Model: model.Throttle{Max: 10_000, Ratio: 100}}
	// The throttle is a Starter too, with no scale: 0, -1 ns and the
	// ends of int64, a nanosecond in (the starts a horizon below them are
	// the same instants), and no steps.
	if es := plainSub.edges(); len(es) != 4 || es[1].start != -1 || es[2].start != math.MinInt64+1 || es[3].start != math.MaxInt64-1 {
		t.Errorf("edges for the throttle start at %v, want [0 -1ns MinInt64+1 MaxInt64-1]", es)
	} else if slices.ContainsFunc(es[0].ops, func(op model.Op) bool { return op.Op == model.Advance }) {
		t.Error("a walk without a scale steps the clock")
	}
}

// A budget that answers wrongly only from a start below zero fails the
// Edges check, with its rule, and passes from zero.
func TestEdgesFindsANegativeStart(t *testing.T) {
	m := model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	sub := Subject[model.TokenBucketState]{Name: "negative", Model: m,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			b, err := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 20, TransientCost: 14, ThrottledCost: 5, SuccessBonus: 1, Clock: c})
			if err != nil {
				t.Fatal(err)
			}
			if c.Now() < 0 {
				return denier{b}
			}
			return b
		}}
	err := sub.run(t, CheckEdges)
	f, ok := err.(*Failure)
	if !ok || f.Rule != string(ruleEdges) {
		t.Fatalf("Edges = %v, want the edges rule broken", err)
	}
	if e := sub.edge(t, edge{start: 0, ops: sub.edges()[0].ops}); e != nil {
		t.Fatalf("from zero: %v", e)
	}
}

// denier denies every retry.
type denier struct{ budget.Budget }

func (denier) Retry(budget.Kind) bool { return false }

package stressrun

import (
	"math/rand/v2"
	"testing"

	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/model"
)

func repeat(c []model.Op, g int) [][]model.Op {
	out := make([][]model.Op, g)
	for i := range out {
		out[i] = c
	}
	return out
}

// A churn's premise holds exactly where no order of the goroutines' calls
// can reach a clamp or change an answer's effect.
func TestChurnPremise(t *testing.T) {
	t.Parallel()
	grpc := model.Throttle{Max: 10_000, Ratio: 100}
	at := func(tokens int64) model.ThrottleState { return model.ThrottleState{Tokens: tokens} }
	cycle := cycleFor[model.ThrottleState](grpc, at(7_000), model.Transient)
	if len(cycle) != 11 || cycle[0] != model.OpRetry(model.Transient) || cycle[1] != model.OpSuccess(model.Transient) {
		t.Fatalf("throttle cycle %v, want a retry and ten successes", cycle)
	}
	for _, c := range []struct {
		tokens int64
		g      int
		want   bool
	}{
		{7_000, 3, true}, {10_000, 4, true}, {4_000, 4, true},
		{3_999, 4, false}, // the fourth retry in a row would stop at 0
		{1_500, 2, false},
	} {
		if got := confluent[model.ThrottleState](grpc, at(c.tokens), repeat(cycle, c.g)); got != c.want {
			t.Errorf("throttle at %d milli-tokens, %d goroutines: confluent = %v, want %v", c.tokens, c.g, got, c.want)
		}
	}

	tb := model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	full := tb.Init()
	thr := cycleFor(tb, full, model.Throttled)
	if len(thr) != 2 || thr[1] != model.OpSuccess(model.Throttled) {
		t.Fatalf("bucket cycle %v, want a retry and its refund", thr)
	}
	if !confluent(tb, full, repeat(thr, 4)) {
		t.Error("four throttled retries and refunds from a full bucket: not confluent, want confluent (20 tokens cover four)")
	}
	if confluent(tb, full, repeat(cycleFor(tb, full, model.Transient), 2)) {
		t.Error("two transient retries and refunds from a full bucket: confluent, want not (the second may be denied, and its refund then credits)")
	}
	// At 10 tokens a transient retry is always denied and changes nothing:
	// one goroutine of it beside two throttled cycles is a premise, beside
	// three it is not.
	ten := model.TokenBucketState{Tokens: 10_000}
	denied := cycleFor(tb, ten, model.Transient)
	if len(denied) != 1 {
		t.Fatalf("a denied transient retry at 10 tokens: cycle %v, want the retry alone", denied)
	}
	thr10 := cycleFor(tb, ten, model.Throttled)
	if !confluent(tb, ten, [][]model.Op{denied, thr10, thr10}) || confluent(tb, ten, [][]model.Op{denied, thr10, thr10, thr10}) {
		t.Error("mixed cycles at 10 tokens: want confluent with two throttled cycles and not with three")
	}
	// A ratio gives no retry back.
	if c := cycleFor(model.SRE(), model.SRE().Init(), model.Transient); c != nil {
		t.Errorf("ratio cycle %v, want none", c)
	}
}

// A plan is never denials alone.
func TestChurnPlanNeedsAChange(t *testing.T) {
	t.Parallel()
	tb := model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	empty := model.TokenBucketState{}
	for seed := range uint64(20) {
		src := harness.Rand(rand.New(rand.NewPCG(seed, 1)))
		if p := churnPlan(src, tb, empty, model.Transient); p != nil {
			t.Fatalf("a plan at an empty bucket: %v", p)
		}
	}
}

package zoo

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

var plainBucket = model.TokenBucket{Capacity: 20000, TransientCost: 14000, ThrottledCost: 5000, SuccessBonus: 1000}

var refillModel = model.TokenBucket{Capacity: 30000, TransientCost: 14000, ThrottledCost: 5000, SuccessBonus: 1000, RefillPerSecond: 10000}

var snapModel = model.TokenBucket{Capacity: 50000, TransientCost: 14000, ThrottledCost: 5000, SuccessBonus: 1000, RefillPerSecond: 3000}

var seqlockModel = model.TokenBucket{Capacity: 40000, TransientCost: 14000, ThrottledCost: 5000, SuccessBonus: 1000, RefillPerSecond: 4000}

// floatModel's quantities are not round in binary: 0.75, 0.05 and 1.25 tokens.
var floatModel = model.TokenBucket{Capacity: 25000, TransientCost: 2500, ThrottledCost: 750, SuccessBonus: 50, RefillPerSecond: 1250}

var throttleModel = model.Throttle{Max: 10000, Ratio: 100}

var (
	_ budget.Budget = (*RWBucket)(nil)
	_ budget.Budget = (*CASBucket)(nil)
	_ budget.Budget = (*RefillBucket)(nil)
	_ budget.Budget = (*RingRatio)(nil)
	_ budget.Budget = (*ActorThrottle)(nil)
	_ budget.Budget = (*SnapBucket)(nil)
	_ budget.Budget = (*SeqlockBucket)(nil)
	_ budget.Budget = (*FloatBucket)(nil)
)

func rwBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.RWBucket", Model: plainBucket,
		New: func(*testing.T, budget.Clock) budget.Budget {
			m := plainBucket
			return NewRWBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus)
		},
	}
}

func TestRWBucket(t *testing.T) { budgettest.Run(t, rwBucketSubject()) }

func casBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.CASBucket", Model: plainBucket,
		New: func(*testing.T, budget.Clock) budget.Budget {
			m := plainBucket
			return NewCASBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus)
		},
	}
}

func TestCASBucket(t *testing.T) { budgettest.Run(t, casBucketSubject()) }

func refillBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.RefillBucket", Model: refillModel,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			m := refillModel
			return NewRefillBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus, m.RefillPerSecond, c)
		},
		Scale: 1400 * time.Millisecond, Horizon: 3 * time.Second,
	}
}

func TestRefillBucket(t *testing.T) { budgettest.Run(t, refillBucketSubject()) }

func ringRatioSubject() budgettest.Subject[model.RatioState] {
	m := model.SRE()
	return budgettest.Subject[model.RatioState]{
		Name: "zoo.RingRatio", Model: m,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			return NewRingRatio(m.PPM, m.Window, m.Slots, m.Floor, c)
		},
		Scale: time.Second, Horizon: 20 * time.Second,
	}
}

func TestRingRatio(t *testing.T) { budgettest.Run(t, ringRatioSubject()) }

func actorThrottleSubject() budgettest.Subject[model.ThrottleState] {
	return budgettest.Subject[model.ThrottleState]{
		Name: "zoo.ActorThrottle", Model: throttleModel,
		New: func(*testing.T, budget.Clock) budget.Budget {
			return NewActorThrottle(throttleModel.Max, throttleModel.Ratio)
		},
	}
}

func TestActorThrottle(t *testing.T) { budgettest.Run(t, actorThrottleSubject()) }

func snapBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.SnapBucket", Model: snapModel,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			return NewSnapBucket(snapModel, c)
		},
		Scale: 2 * time.Second, Horizon: 30 * time.Second,
	}
}

func TestSnapBucket(t *testing.T) { budgettest.Run(t, snapBucketSubject()) }

func seqlockBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.SeqlockBucket", Model: seqlockModel,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			m := seqlockModel
			return NewSeqlockBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus, m.RefillPerSecond, c)
		},
		Scale: 1250 * time.Millisecond, Horizon: 20 * time.Second,
	}
}

func TestSeqlockBucket(t *testing.T) { budgettest.Run(t, seqlockBucketSubject()) }

func floatBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.FloatBucket", Model: floatModel,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			return NewFloatBucket(25, 2.5, 0.75, 0.05, 1.25, c)
		},
		Scale: 600 * time.Millisecond, Horizon: 40 * time.Second,
	}
}

func TestFloatBucket(t *testing.T) { budgettest.Run(t, floatBucketSubject()) }

// FloatBucket and SeqlockBucket answer, and report balances, exactly as the
// model does on long random sequences with clock steps far below and far
// above a milli-token's worth of refill, driven one call at a time.
func TestFloatAndSeqlockMatchModel(t *testing.T) {
	type availer interface {
		budget.Budget
		Available() float64
	}
	for _, tc := range []struct {
		name  string
		m     model.TokenBucket
		build func(budget.Clock) availer
	}{
		{"FloatBucket", floatModel, func(c budget.Clock) availer { return NewFloatBucket(25, 2.5, 0.75, 0.05, 1.25, c) }},
		{"SeqlockBucket", seqlockModel, func(c budget.Clock) availer {
			m := seqlockModel
			return NewSeqlockBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus, m.RefillPerSecond, c)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			clock := new(budget.ManualClock)
			b := tc.build(clock)
			s := tc.m.Init()
			steps := []time.Duration{1, 7, 300 * time.Microsecond, 799 * time.Microsecond, 3 * time.Millisecond, 333 * time.Millisecond, 5 * time.Second, -time.Second}
			for i := range 200_000 {
				var op model.Op
				switch r := rng.IntN(10); {
				case r < 4:
					op = model.OpAdvance(steps[rng.IntN(len(steps))])
				case r < 7:
					op = model.OpRetry(model.Kind(rng.IntN(3)))
				default:
					op = model.OpSuccess(model.Kind(rng.IntN(3)))
				}
				var got bool
				switch op.Op {
				case model.Advance:
					clock.Advance(op.D)
				case model.Retry:
					got = b.Retry(budget.Kind(op.Kind))
				case model.Success:
					b.Success(budget.Kind(op.Kind))
				}
				var want bool
				s, want = tc.m.Step(s, op)
				if got != want {
					t.Fatalf("op %d %s: got %v, model %v (%s)", i, op, got, want, tc.m.DescribeState(s))
				}
				if a, w := b.Available(), float64(tc.m.Balance(s))/1000; a != w {
					t.Fatalf("op %d %s: Available() = %v, model %v", i, op, a, w)
				}
			}
		})
	}
}

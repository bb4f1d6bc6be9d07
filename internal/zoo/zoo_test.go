package zoo

import (
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

var plainBucket = model.TokenBucket{Capacity: 20000, TransientCost: 14000, ThrottledCost: 5000, SuccessBonus: 1000}

var refillModel = model.TokenBucket{Capacity: 30000, TransientCost: 14000, ThrottledCost: 5000, SuccessBonus: 1000, RefillPerSecond: 10000}

var snapModel = model.TokenBucket{Capacity: 50000, TransientCost: 14000, ThrottledCost: 5000, SuccessBonus: 1000, RefillPerSecond: 3000}

var throttleModel = model.Throttle{Max: 10000, Ratio: 100}

var (
	_ budget.Budget = (*RWBucket)(nil)
	_ budget.Budget = (*CASBucket)(nil)
	_ budget.Budget = (*RefillBucket)(nil)
	_ budget.Budget = (*RingRatio)(nil)
	_ budget.Budget = (*ActorThrottle)(nil)
	_ budget.Budget = (*SnapBucket)(nil)
)

func TestRWBucket(t *testing.T) {
	budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.RWBucket", Model: plainBucket,
		New: func(*testing.T, budget.Clock) budget.Budget {
			m := plainBucket
			return NewRWBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus)
		},
	})
}

func TestCASBucket(t *testing.T) {
	budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.CASBucket", Model: plainBucket,
		New: func(*testing.T, budget.Clock) budget.Budget {
			m := plainBucket
			return NewCASBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus)
		},
	})
}

func TestRefillBucket(t *testing.T) {
	budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.RefillBucket", Model: refillModel,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			m := refillModel
			return NewRefillBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus, m.RefillPerSecond, c)
		},
		Scale: 1400 * time.Millisecond, Horizon: 3 * time.Second,
	})
}

func TestRingRatio(t *testing.T) {
	m := model.SRE()
	budgettest.Run(t, budgettest.Subject[model.RatioState]{
		Name: "zoo.RingRatio", Model: m,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			return NewRingRatio(m.PPM, m.Window, m.Slots, m.Floor, c)
		},
		Scale: time.Second, Horizon: 20 * time.Second,
	})
}

func TestActorThrottle(t *testing.T) {
	budgettest.Run(t, budgettest.Subject[model.ThrottleState]{
		Name: "zoo.ActorThrottle", Model: throttleModel,
		New: func(*testing.T, budget.Clock) budget.Budget {
			return NewActorThrottle(throttleModel.Max, throttleModel.Ratio)
		},
	})
}

func TestSnapBucket(t *testing.T) {
	budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.SnapBucket", Model: snapModel,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			return NewSnapBucket(snapModel, c)
		},
		Scale: 2 * time.Second, Horizon: 30 * time.Second,
	})
}

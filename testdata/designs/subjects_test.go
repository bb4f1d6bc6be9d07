package designs

import (
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

// The models the budgets claim to follow.
var (
	// condModel refills a third of a milli-token a millisecond, so the
	// carried fraction matters: 10 tokens, 2.5 a transient retry, 1 a
	// throttled one, 0.1 a successful first attempt.
	condModel = model.TokenBucket{Capacity: 10_000, TransientCost: 2_500, ThrottledCost: 1_000, SuccessBonus: 100, RefillPerSecond: 333}
	// actorModel refills 1.5 tokens a second and gives a successful retry
	// the bonus, not its cost back.
	actorModel = model.TokenBucket{Capacity: 20_000, TransientCost: 3_000, ThrottledCost: 1_500, SuccessBonus: 500, RefillPerSecond: 1_500, NoRefund: true}
	// ticketModel is gRPC's default retry throttling: 10 tokens, 0.1 a
	// success.
	ticketModel = model.Throttle{Max: 10_000, Ratio: 100}
	// syncMapModel is a throttle of 7.5 tokens, 1.25 a success: an odd
	// maximum, so that "more than half" sits between whole tokens.
	syncMapModel = model.Throttle{Max: 7_500, Ratio: 1_250}
	// hintModel is the SRE book's ratio: 10% over 10 s in 10 slots, floor 3.
	hintModel = model.SRE()
	// persistentModel is 20% over 3 s in 6 slots, floor 2, reserve 1.
	persistentModel = model.Ratio{PPM: 200_000, Window: 3 * time.Second, Slots: 6, Floor: 2, Reserve: 1}
	// stripedModel is failsafe-go's in-flight rule with its defaults.
	stripedModel = model.FailsafeDefaults()
	// rwModel is Envoy's retry_budget with its defaults.
	rwModel = model.EnvoyDefaults()
)

func bucketConfig(m model.TokenBucket) BucketConfig {
	return BucketConfig{
		Capacity:        m.Capacity,
		TransientCost:   m.TransientCost,
		ThrottledCost:   m.ThrottledCost,
		SuccessBonus:    m.SuccessBonus,
		RefillPerSecond: m.RefillPerSecond,
		NoRefund:        m.NoRefund,
	}
}

func ratioConfig(m model.Ratio) RatioConfig {
	return RatioConfig{PPM: m.PPM, Window: m.Window, Slots: m.Slots, Floor: m.Floor, Reserve: m.Reserve}
}

func throttleConfig(m model.Throttle) ThrottleConfig {
	return ThrottleConfig{Max: m.Max, Ratio: m.Ratio}
}

func inFlightConfig(m model.InFlight) InFlightConfig {
	return InFlightConfig{PPM: m.PPM, MinConcurrency: m.MinConcurrency, Failsafe: m.Rule == model.Failsafe}
}

// A design is one budget with the model it claims, its state type erased
// so that designs of every family fit in one table.
type design struct {
	name string
	run  func(t *testing.T)              // the whole suite
	seq  func(t *testing.T, seed uint64) // the package's own sequential comparison
}

func designOf[S any](name string, m model.Model[S], build func(clock budget.Clock) budget.Budget) design {
	sub := budgettest.Subject[S]{
		Name:  name,
		Model: m,
		New:   func(t *testing.T, clock budget.Clock) budget.Budget { return build(clock) },
	}
	return design{
		name: name,
		run:  func(t *testing.T) { budgettest.Run(t, sub) },
		seq:  func(t *testing.T, seed uint64) { sequential(t, seed, m, build) },
	}
}

func designs() []design {
	return []design{
		designOf("CondBucket", condModel, func(c budget.Clock) budget.Budget {
			return NewCondBucket(bucketConfig(condModel), c)
		}),
		designOf("ActorBucket", actorModel, func(c budget.Clock) budget.Budget {
			return NewActorBucket(bucketConfig(actorModel), c)
		}),
		designOf("TicketThrottle", ticketModel, func(budget.Clock) budget.Budget {
			return NewTicketThrottle(throttleConfig(ticketModel))
		}),
		designOf("SyncMapThrottle", syncMapModel, func(budget.Clock) budget.Budget {
			return NewSyncMapThrottle(throttleConfig(syncMapModel))
		}),
		designOf("HintRatio", hintModel, func(c budget.Clock) budget.Budget {
			return NewHintRatio(ratioConfig(hintModel), c)
		}),
		designOf("PersistentRatio", persistentModel, func(c budget.Clock) budget.Budget {
			return NewPersistentRatio(ratioConfig(persistentModel), c)
		}),
		designOf("StripedInFlight", stripedModel, func(budget.Clock) budget.Budget {
			return NewStripedInFlight(inFlightConfig(stripedModel))
		}),
		designOf("InvertedRWInFlight", rwModel, func(budget.Clock) budget.Budget {
			return NewInvertedRWInFlight(inFlightConfig(rwModel))
		}),
	}
}

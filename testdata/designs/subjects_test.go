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

	// checksumModel is 12.5% over 9 s in 150 slots of 60 ms, floor 2,
	// reserve 1: a ring long enough that verifying it is real work.
	checksumModel = model.Ratio{PPM: 125_000, Window: 9 * time.Second, Slots: 150, Floor: 2, Reserve: 1}
	// semaphoreModel is a throttle of 5.3 tokens, 0.7 a success: half the
	// maximum, 2.65, is between whole tokens.
	semaphoreModel = model.Throttle{Max: 5_300, Ratio: 700}
	// lockboxModel is Envoy's rule at a third (333,333 ppm, so that ⌊PPM ×
	// calls / 1e6⌋ steps at every third call but one), floor 2.
	lockboxModel = model.InFlight{PPM: 333_333, MinConcurrency: 2, Rule: model.Envoy}
	// wallClockModel refills 0.777 tokens a second: 12 tokens, 3.5 a
	// transient retry, 1.2 a throttled one, 0.25 a successful first
	// attempt.
	wallClockModel = model.TokenBucket{Capacity: 12_000, TransientCost: 3_500, ThrottledCost: 1_200, SuccessBonus: 250, RefillPerSecond: 777}
	// networkedModel is a throttle of 3 tokens, 0.45 a success: a full
	// count grants one retry, then denies until successes refill it.
	networkedModel = model.Throttle{Max: 3_000, Ratio: 450}
	// pipeModel is a third (333,333 ppm) over 2.5 s in 5 slots, no floor,
	// reserve 2.
	pipeModel = model.Ratio{PPM: 333_333, Window: 2500 * time.Millisecond, Slots: 5, Reserve: 2}
	// rwBucketModel has no refill and costs that do not divide the
	// capacity: 7 tokens, 2.333 a transient retry, 1.001 a throttled one,
	// 0.077 a successful first attempt.
	rwBucketModel = model.TokenBucket{Capacity: 7_000, TransientCost: 2_333, ThrottledCost: 1_001, SuccessBonus: 77}
	// packedModel is failsafe-go's rule at a quarter, floor 1.
	packedModel = model.InFlight{PPM: 250_000, MinConcurrency: 1, Rule: model.Failsafe}
	// lazyModel is 5% over 1.3 s in 7 slots (a width of 185,714,285 ns,
	// rounded down), floor 5.
	lazyModel = model.Ratio{PPM: 50_000, Window: 1300 * time.Millisecond, Slots: 7, Floor: 5}
	// handoffModel refills 2.1 tokens a second and gives a successful
	// retry the bonus, not its cost back: 4.5 tokens, 1.5 a transient
	// retry, 0.9 a throttled one, 0.03 a success.
	handoffModel = model.TokenBucket{Capacity: 4_500, TransientCost: 1_500, ThrottledCost: 900, SuccessBonus: 30, RefillPerSecond: 2_100, NoRefund: true}
	// epochModel is 20% over 4 s in 3 slots (a width of 1,333,333,333 ns),
	// floor 1, reserve 3.
	epochModel = model.Ratio{PPM: 200_000, Window: 4 * time.Second, Slots: 3, Floor: 1, Reserve: 3}
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
	return subjectDesign(budgettest.Subject[S]{Name: name, Model: m}, build)
}

// remoteDesignOf is designOf for a budget whose state is behind a network
// connection: the suite is told so (Subject.Remote), as the README asks of
// a networked budget.
func remoteDesignOf[S any](name string, m model.Model[S], build func(clock budget.Clock) budget.Budget) design {
	return subjectDesign(budgettest.Subject[S]{Name: name, Model: m, Remote: true}, build)
}

func subjectDesign[S any](sub budgettest.Subject[S], build func(clock budget.Clock) budget.Budget) design {
	name, m := sub.Name, sub.Model
	sub.New = func(t *testing.T, clock budget.Clock) budget.Budget { return build(clock) }
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
		designOf("ChecksumRatio", checksumModel, func(c budget.Clock) budget.Budget {
			return NewChecksumRatio(ratioConfig(checksumModel), c)
		}),
		designOf("SemaphoreThrottle", semaphoreModel, func(budget.Clock) budget.Budget {
			return NewSemaphoreThrottle(throttleConfig(semaphoreModel))
		}),
		designOf("LockboxInFlight", lockboxModel, func(budget.Clock) budget.Budget {
			return NewLockboxInFlight(inFlightConfig(lockboxModel))
		}),
		wallDesignOf("WallClockBucket", wallClockModel, func() budget.Budget {
			return NewWallClockBucket(bucketConfig(wallClockModel))
		}),
		remoteDesignOf("NetworkedThrottle", networkedModel, func(budget.Clock) budget.Budget {
			b, err := NewNetworkedThrottle(throttleConfig(networkedModel))
			if err != nil {
				panic(err)
			}
			return b
		}),
		designOf("PipeRatio", pipeModel, func(c budget.Clock) budget.Budget {
			return NewPipeRatio(ratioConfig(pipeModel), c)
		}),
		designOf("RWBucket", rwBucketModel, func(budget.Clock) budget.Budget {
			return NewRWBucket(bucketConfig(rwBucketModel))
		}),
		designOf("PackedInFlight", packedModel, func(budget.Clock) budget.Budget {
			return NewPackedInFlight(inFlightConfig(packedModel))
		}),
		designOf("LazyRatio", lazyModel, func(c budget.Clock) budget.Budget {
			return NewLazyRatio(ratioConfig(lazyModel), c)
		}),
		designOf("HandoffBucket", handoffModel, func(c budget.Clock) budget.Budget {
			return NewHandoffBucket(bucketConfig(handoffModel), c)
		}),
		designOf("EpochRatio", epochModel, func(c budget.Clock) budget.Budget {
			return NewEpochRatio(ratioConfig(epochModel), c)
		}),
	}
}

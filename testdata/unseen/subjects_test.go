package unseen

import (
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

// The models the budgets claim to follow.
var (
	// awsModel is the AWS SDK's retry quota: 500 tokens, 14 a transient
	// retry, 5 a throttled one, 1 a successful first attempt, no refill.
	awsModel = model.AWS()
	// refillModel is a small bucket that refills with time: 50 tokens,
	// the AWS costs, 2 tokens a second.
	refillModel = model.TokenBucket{Capacity: 50_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 2_000}
	// sreModel is the SRE book's ratio: 10% over 10 s in 10 slots, floor 3.
	sreModel = model.SRE()
	// fixedModel is a fixed window: 10% of the requests of each second,
	// floor 3.
	fixedModel = model.Ratio{PPM: 100_000, Window: time.Second, Slots: 1, Floor: 3}
	// finagleModel is a ratio with an additive reserve: 25% over 2 s in 4
	// slots, floor 2, reserve 1.
	finagleModel = model.Ratio{PPM: 250_000, Window: 2 * time.Second, Slots: 4, Floor: 2, Reserve: 1}
	// throttleModel is gRPC's default retry throttling: 10 tokens, 0.1 a
	// success.
	throttleModel = model.Throttle{Max: 10_000, Ratio: 100}
	// envoyModel is Envoy's retry_budget: 20% of the calls in flight,
	// at least 3.
	envoyModel = model.EnvoyDefaults()
)

// An entry is one subject with its state type erased, so that subjects of
// every family fit in one table.
type entry struct {
	name   string
	verify func(t *testing.T) error
	check  func(t *testing.T, c budgettest.Check) error
	run    func(t *testing.T)
}

func entryOf[S any](sub budgettest.Subject[S]) entry {
	return entry{
		name:   sub.Name,
		verify: func(t *testing.T) error { return budgettest.Verify(t, sub) },
		check:  func(t *testing.T, c budgettest.Check) error { return budgettest.VerifyCheck(t, sub, c) },
		run:    func(t *testing.T) { budgettest.Run(t, sub) },
	}
}

func subject[S any](name string, m model.Model[S], build func(clock budget.Clock) budget.Budget) budgettest.Subject[S] {
	return budgettest.Subject[S]{
		Name:  name,
		Model: m,
		New:   func(t *testing.T, clock budget.Clock) budget.Budget { return build(clock) },
	}
}

// Subjects of the broken budgets.

func LoadAddBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return subject("LoadAddBucket", awsModel, func(budget.Clock) budget.Budget { return NewLoadAddBucket(awsModel) })
}

func StaleCASBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return subject("StaleCASBucket", awsModel, func(budget.Clock) budget.Budget { return NewStaleCASBucket(awsModel) })
}

func RLockBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return subject("RLockBucket", awsModel, func(budget.Clock) budget.Budget { return NewRLockBucket(awsModel) })
}

func SplitAtomicsBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return subject("SplitAtomicsBucket", refillModel, func(c budget.Clock) budget.Budget { return NewSplitAtomicsBucket(refillModel, c) })
}

func DoubleRefillBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return subject("DoubleRefillBucket", refillModel, func(c budget.Clock) budget.Budget { return NewDoubleRefillBucket(refillModel, c) })
}

func ComposedLocksRatioSubject() budgettest.Subject[model.RatioState] {
	return subject("ComposedLocksRatio", sreModel, func(c budget.Clock) budget.Budget { return NewComposedLocksRatio(sreModel, c) })
}

func LateTotalRatioSubject() budgettest.Subject[model.RatioState] {
	return subject("LateTotalRatio", sreModel, func(c budget.Clock) budget.Budget { return NewLateTotalRatio(sreModel, c) })
}

func RecheckRatioSubject() budgettest.Subject[model.RatioState] {
	return subject("RecheckRatio", fixedModel, func(c budget.Clock) budget.Budget { return NewRecheckRatio(fixedModel, c) })
}

func ClampStoreThrottleSubject() budgettest.Subject[model.ThrottleState] {
	return subject("ClampStoreThrottle", throttleModel, func(budget.Clock) budget.Budget { return NewClampStoreThrottle(throttleModel) })
}

func LazyThrottleSubject() budgettest.Subject[model.ThrottleState] {
	return subject("LazyThrottle", throttleModel, func(budget.Clock) budget.Budget { return NewLazyThrottle(throttleModel) })
}

func RereadThrottleSubject() budgettest.Subject[model.ThrottleState] {
	return subject("RereadThrottle", throttleModel, func(budget.Clock) budget.Budget { return NewRereadThrottle(throttleModel) })
}

func CheckThenActInFlightSubject() budgettest.Subject[model.InFlightState] {
	return subject("CheckThenActInFlight", envoyModel, func(budget.Clock) budget.Budget { return NewCheckThenActInFlight(envoyModel) })
}

func OptimisticInFlightSubject() budgettest.Subject[model.InFlightState] {
	return subject("OptimisticInFlight", envoyModel, func(budget.Clock) budget.Budget { return NewOptimisticInFlight(envoyModel) })
}

func ShardedInFlightSubject() budgettest.Subject[model.InFlightState] {
	return subject("ShardedInFlight", envoyModel, func(budget.Clock) budget.Budget { return NewShardedInFlight(envoyModel) })
}

// Subjects of the correct budgets.

func SpinBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return subject("SpinBucket", refillModel, func(c budget.Clock) budget.Budget { return NewSpinBucket(refillModel, c) })
}

func CowRatioSubject() budgettest.Subject[model.RatioState] {
	return subject("CowRatio", sreModel, func(c budget.Clock) budget.Budget { return NewCowRatio(sreModel, c) })
}

// KeyedBucketSubject reaches the bucket of one host among several through
// budget.Keyed; the other hosts' buckets are built and drained first.
func KeyedBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return subject("KeyedBucket", refillModel, func(c budget.Clock) budget.Budget {
		cfg := budget.TokenBucketConfig{
			Capacity:        float64(refillModel.Capacity) / milli,
			TransientCost:   float64(refillModel.TransientCost) / milli,
			ThrottledCost:   float64(refillModel.ThrottledCost) / milli,
			SuccessBonus:    float64(refillModel.SuccessBonus) / milli,
			RefillPerSecond: float64(refillModel.RefillPerSecond) / milli,
			Clock:           c,
		}
		perHost, err := budget.NewKeyed(budget.KeyedConfig[string, *budget.TokenBucket]{
			New:     func(string) (*budget.TokenBucket, error) { return budget.NewTokenBucket(cfg) },
			MaxKeys: 64,
		})
		if err != nil {
			panic(err)
		}
		for _, host := range []string{"a.example", "c.example", "d.example"} {
			b := NewKeyedBucket(perHost, host)
			for b.Retry(budget.Transient) {
			}
		}
		// The model's budget is built when the factory runs, on the
		// clock's reading then: build b.example's bucket now, not on its
		// first call, which may come after the clock went back.
		b := NewKeyedBucket(perHost, "b.example")
		b.bucket()
		return b
	})
}

func ActorInFlightSubject() budgettest.Subject[model.InFlightState] {
	return subject("ActorInFlight", envoyModel, func(budget.Clock) budget.Budget { return NewActorInFlight(envoyModel) })
}

func ChanSemThrottleSubject() budgettest.Subject[model.ThrottleState] {
	return subject("ChanSemThrottle", throttleModel, func(budget.Clock) budget.Budget { return NewChanSemThrottle(throttleModel) })
}

func PendingCreditBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return subject("PendingCreditBucket", awsModel, func(budget.Clock) budget.Budget { return NewPendingCreditBucket(awsModel) })
}

func TryLockRatioSubject() budgettest.Subject[model.RatioState] {
	return subject("TryLockRatio", finagleModel, func(c budget.Clock) budget.Budget { return NewTryLockRatio(finagleModel, c) })
}

func brokenEntries() []entry {
	return []entry{
		entryOf(LoadAddBucketSubject()),
		entryOf(StaleCASBucketSubject()),
		entryOf(RLockBucketSubject()),
		entryOf(SplitAtomicsBucketSubject()),
		entryOf(DoubleRefillBucketSubject()),
		entryOf(ComposedLocksRatioSubject()),
		entryOf(LateTotalRatioSubject()),
		entryOf(RecheckRatioSubject()),
		entryOf(ClampStoreThrottleSubject()),
		entryOf(LazyThrottleSubject()),
		entryOf(RereadThrottleSubject()),
		entryOf(CheckThenActInFlightSubject()),
		entryOf(OptimisticInFlightSubject()),
		entryOf(ShardedInFlightSubject()),
	}
}

func correctEntries() []entry {
	return []entry{
		entryOf(SpinBucketSubject()),
		entryOf(CowRatioSubject()),
		entryOf(KeyedBucketSubject()),
		entryOf(ActorInFlightSubject()),
		entryOf(ChanSemThrottleSubject()),
		entryOf(PendingCreditBucketSubject()),
		entryOf(TryLockRatioSubject()),
	}
}

// firstLines returns the first line of each failure joined in err.
func firstLines(err error) []string {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var lines []string
	for _, e := range errs {
		if e == nil {
			continue
		}
		line, _, _ := strings.Cut(e.Error(), "\n")
		lines = append(lines, line)
	}
	return lines
}

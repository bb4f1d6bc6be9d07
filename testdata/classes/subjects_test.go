package classes

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
	// retry, 5 a throttled one, 1 a successful first attempt.
	awsModel = model.AWS()
	// dimeModel is a bucket of 1000 tokens with the AWS costs and a tenth
	// of a token a successful first attempt.
	dimeModel = model.TokenBucket{Capacity: 1_000_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 100}
	// flatModel is a bucket of 10 tokens whose retries all cost 1 token,
	// with a tenth of a token a successful first attempt.
	flatModel = model.TokenBucket{Capacity: 10_000, TransientCost: 1_000, ThrottledCost: 1_000, SuccessBonus: 100}
	// refillModel is a bucket of 50 tokens, the AWS costs, 1 token a
	// success, refilling 2 tokens a second.
	refillModel = model.TokenBucket{Capacity: 50_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 2_000}
	// sreModel is the SRE book's ratio: 10% over 10 s in 10 slots, floor 3.
	sreModel = model.SRE()
	// ratio29Model is 29% over 10 s in 10 slots, floor 3.
	ratio29Model = model.Ratio{PPM: 290_000, Window: 10 * time.Second, Slots: 10, Floor: 3}
	// throttleModel is gRPC's default retry throttling: 10 tokens, 0.1 a
	// success.
	throttleModel = model.Throttle{Max: 10_000, Ratio: 100}
	// envoyModel is Envoy's retry_budget: 20% of the calls in flight, at
	// least 3.
	envoyModel = model.EnvoyDefaults()
	// envoy35Model is Envoy's rule with a budget_percent of 35, at least 3.
	envoy35Model = model.InFlight{PPM: 350_000, MinConcurrency: 3, Rule: model.Envoy}
	// failsafeModel is failsafe-go's budget: 20%, at least 3.
	failsafeModel = model.FailsafeDefaults()
)

// An entry is one subject with its state type erased, so that subjects of
// every family fit in one table.
type entry struct {
	name   string
	class  int // 1 to 4 for a broken budget, 0 for a correct one
	verify func(t *testing.T) error
	check  func(t *testing.T, c budgettest.Check) error
	run    func(t *testing.T)
}

func entryOf[S any](class int, sub budgettest.Subject[S]) entry {
	return entry{
		name:   sub.Name,
		class:  class,
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

// Subjects of the broken budgets, by class.

func GRPCFloatThrottleSubject() budgettest.Subject[model.ThrottleState] {
	return subject("GRPCFloatThrottle", throttleModel, func(budget.Clock) budget.Budget { return NewGRPCFloatThrottle(throttleModel) })
}

func DimeBonusBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return subject("DimeBonusBucket", dimeModel, func(budget.Clock) budget.Budget { return NewDimeBonusBucket(dimeModel) })
}

func FloatRatioSubject() budgettest.Subject[model.RatioState] {
	return subject("FloatRatio", ratio29Model, func(c budget.Clock) budget.Budget { return NewFloatRatio(ratio29Model, c) })
}

func FloatPercentInFlightSubject() budgettest.Subject[model.InFlightState] {
	return subject("FloatPercentInFlight", envoy35Model, func(budget.Clock) budget.Budget { return NewFloatPercentInFlight(envoy35Model) })
}

func LateEmptyFlagBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return subject("LateEmptyFlagBucket", awsModel, func(budget.Clock) budget.Budget { return NewLateEmptyFlagBucket(awsModel) })
}

func LateLimitRatioSubject() budgettest.Subject[model.RatioState] {
	return subject("LateLimitRatio", sreModel, func(c budget.Clock) budget.Budget { return NewLateLimitRatio(sreModel, c) })
}

func LateFullFlagThrottleSubject() budgettest.Subject[model.ThrottleState] {
	return subject("LateFullFlagThrottle", throttleModel, func(budget.Clock) budget.Budget { return NewLateFullFlagThrottle(throttleModel) })
}

func LateLimitInFlightSubject() budgettest.Subject[model.InFlightState] {
	return subject("LateLimitInFlight", envoyModel, func(budget.Clock) budget.Budget { return NewLateLimitInFlight(envoyModel) })
}

func UncheckedSeqlockBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return subject("UncheckedSeqlockBucket", refillModel, func(c budget.Clock) budget.Budget { return NewUncheckedSeqlockBucket(refillModel, c) })
}

func OddSeqlockRatioSubject() budgettest.Subject[model.RatioState] {
	return subject("OddSeqlockRatio", sreModel, func(c budget.Clock) budget.Budget { return NewOddSeqlockRatio(sreModel, c) })
}

func LateBumpSeqlockInFlightSubject() budgettest.Subject[model.InFlightState] {
	return subject("LateBumpSeqlockInFlight", failsafeModel, func(budget.Clock) budget.Budget { return NewLateBumpSeqlockInFlight(failsafeModel) })
}

func OptimisticUndoBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return subject("OptimisticUndoBucket", flatModel, func(budget.Clock) budget.Budget { return NewOptimisticUndoBucket(flatModel) })
}

func StaleLimitRatioSubject() budgettest.Subject[model.RatioState] {
	return subject("StaleLimitRatio", sreModel, func(c budget.Clock) budget.Budget { return NewStaleLimitRatio(sreModel, c) })
}

func StaleLimitInFlightSubject() budgettest.Subject[model.InFlightState] {
	return subject("StaleLimitInFlight", envoyModel, func(budget.Clock) budget.Budget { return NewStaleLimitInFlight(envoyModel) })
}

// Subjects of the correct budgets.

func MilliFloatThrottleSubject() budgettest.Subject[model.ThrottleState] {
	return subject("MilliFloatThrottle", throttleModel, func(budget.Clock) budget.Budget { return NewMilliFloatThrottle(throttleModel) })
}

func EmptyFlagBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return subject("EmptyFlagBucket", awsModel, func(budget.Clock) budget.Budget { return NewEmptyFlagBucket(awsModel) })
}

func CachedLimitRatioSubject() budgettest.Subject[model.RatioState] {
	return subject("CachedLimitRatio", sreModel, func(c budget.Clock) budget.Budget { return NewCachedLimitRatio(sreModel, c) })
}

func SeqlockBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return subject("SeqlockBucket", refillModel, func(c budget.Clock) budget.Budget { return NewSeqlockBucket(refillModel, c) })
}

func SeqlockInFlightSubject() budgettest.Subject[model.InFlightState] {
	return subject("SeqlockInFlight", failsafeModel, func(budget.Clock) budget.Budget { return NewSeqlockInFlight(failsafeModel) })
}

func CASInFlightSubject() budgettest.Subject[model.InFlightState] {
	return subject("CASInFlight", envoyModel, func(budget.Clock) budget.Budget { return NewCASInFlight(envoyModel) })
}

func brokenEntries() []entry {
	return []entry{
		entryOf(1, GRPCFloatThrottleSubject()),
		entryOf(1, DimeBonusBucketSubject()),
		entryOf(1, FloatRatioSubject()),
		entryOf(1, FloatPercentInFlightSubject()),
		entryOf(2, LateEmptyFlagBucketSubject()),
		entryOf(2, LateLimitRatioSubject()),
		entryOf(2, LateFullFlagThrottleSubject()),
		entryOf(2, LateLimitInFlightSubject()),
		entryOf(3, UncheckedSeqlockBucketSubject()),
		entryOf(3, OddSeqlockRatioSubject()),
		entryOf(3, LateBumpSeqlockInFlightSubject()),
		entryOf(4, OptimisticUndoBucketSubject()),
		entryOf(4, StaleLimitRatioSubject()),
		entryOf(4, StaleLimitInFlightSubject()),
	}
}

func correctEntries() []entry {
	return []entry{
		entryOf(0, MilliFloatThrottleSubject()),
		entryOf(0, EmptyFlagBucketSubject()),
		entryOf(0, CachedLimitRatioSubject()),
		entryOf(0, SeqlockBucketSubject()),
		entryOf(0, SeqlockInFlightSubject()),
		entryOf(0, CASInFlightSubject()),
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

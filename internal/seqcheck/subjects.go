package seqcheck

import (
	"time"

	"pgregory.net/rapid"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// DrawTokenBucket draws token-bucket parameters: the AWS defaults, seed
// 004's small bucket, or random ones. With refill false it never draws a
// refill rate.
func DrawTokenBucket(t *rapid.T, refill bool) model.TokenBucket {
	var m model.TokenBucket
	switch rapid.IntRange(0, 3).Draw(t, "preset") {
	case 0:
		m = model.AWS()
	case 1:
		m = model.TokenBucket{Capacity: 30_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	default:
		c := rapid.Int64Range(1, 50_000).Draw(t, "capacity")
		m = model.TokenBucket{
			Capacity:      c,
			TransientCost: rapid.Int64Range(1, c).Draw(t, "transientCost"),
			ThrottledCost: rapid.Int64Range(1, c).Draw(t, "throttledCost"),
			SuccessBonus:  rapid.Int64Range(0, c).Draw(t, "successBonus"),
		}
	}
	m.NoRefund = rapid.IntRange(0, 3).Draw(t, "noRefund") == 0
	if refill && rapid.Bool().Draw(t, "refill") {
		m.RefillPerSecond = rapid.Int64Range(1, 10_000_000).Draw(t, "refillPerSecond")
	}
	return m
}

// TokenBucketTiming returns the durations that matter to m.
func TokenBucketTiming(m model.TokenBucket) Timing {
	if m.RefillPerSecond == 0 {
		return Timing{}
	}
	perRetry := max(m.TransientCost, m.ThrottledCost) * int64(time.Second) / m.RefillPerSecond
	full := m.Capacity * int64(time.Second) / m.RefillPerSecond
	return Timing{Scale: time.Duration(max(perRetry, 1)), Horizon: time.Duration(max(full, 2))}
}

// TokenBucketConfig returns the budget configuration that m specifies.
func TokenBucketConfig(m model.TokenBucket, clock budget.Clock) budget.TokenBucketConfig {
	return budget.TokenBucketConfig{
		Capacity:        milliToFloat(m.Capacity),
		TransientCost:   milliToFloat(m.TransientCost),
		ThrottledCost:   milliToFloat(m.ThrottledCost),
		SuccessBonus:    milliToFloat(m.SuccessBonus),
		NoRefund:        m.NoRefund,
		RefillPerSecond: milliToFloat(m.RefillPerSecond),
		Clock:           clock,
	}
}

// DrawRatio draws ratio parameters: the SRE defaults, or random ones, with
// windows from a few nanoseconds to an hour and up to 1000 slots.
func DrawRatio(t *rapid.T) model.Ratio {
	if rapid.IntRange(0, 3).Draw(t, "preset") == 0 {
		return model.SRE()
	}
	slots := rapid.Int64Range(1, 1000).Draw(t, "slots")
	window := rapid.SampledFrom([]time.Duration{time.Duration(slots), 10 * time.Second, time.Hour}).Draw(t, "windowBase")
	window += time.Duration(rapid.Int64Range(0, slots*3).Draw(t, "windowExtra"))
	return model.Ratio{
		PPM:    rapid.SampledFrom([]int64{1, 100_000, 200_000, 500_000, 1_000_000}).Draw(t, "ppm"),
		Window: window,
		Slots:  slots,
		Floor:  rapid.Int64Range(0, 5).Draw(t, "floor"),
	}
}

// RatioTiming returns the durations that matter to m.
func RatioTiming(m model.Ratio) Timing {
	return Timing{Scale: m.Window / time.Duration(m.Slots), Horizon: 2 * m.Window}
}

// RatioConfig returns the budget configuration that m specifies.
func RatioConfig(m model.Ratio, clock budget.Clock) budget.RatioConfig {
	return budget.RatioConfig{
		Ratio:   float64(m.PPM) / 1e6,
		Window:  m.Window,
		Slots:   int(m.Slots),
		Floor:   int(m.Floor),
		Reserve: int(m.Reserve),
		Clock:   clock,
	}
}

// DrawThrottle draws throttle parameters: gRPC's example (10 tokens, ratio
// 0.1), or random ones.
func DrawThrottle(t *rapid.T) model.Throttle {
	if rapid.IntRange(0, 3).Draw(t, "preset") == 0 {
		return model.Throttle{Max: 10_000, Ratio: 100}
	}
	return model.Throttle{
		Max:   rapid.Int64Range(1, 20_000).Draw(t, "max"),
		Ratio: rapid.Int64Range(1, 3_000).Draw(t, "ratio"),
	}
}

func milliToFloat(m int64) float64 { return float64(m) / 1000 }

// NewTokenBucket returns a factory of reference TokenBuckets configured as m
// specifies. It panics if the constructor rejects m: a test's parameters
// are the test's bug.
func NewTokenBucket(m model.TokenBucket) func(budget.Clock) budget.Budget {
	return func(c budget.Clock) budget.Budget {
		b, err := budget.NewTokenBucket(TokenBucketConfig(m, c))
		if err != nil {
			panic(err)
		}
		return b
	}
}

// NewRatio returns a factory of reference Ratios configured as m specifies.
// It panics if the constructor rejects m.
func NewRatio(m model.Ratio) func(budget.Clock) budget.Budget {
	return func(c budget.Clock) budget.Budget {
		b, err := budget.NewRatio(RatioConfig(m, c))
		if err != nil {
			panic(err)
		}
		return b
	}
}

// NewThrottle returns a factory of reference Throttles configured as m
// specifies. It panics if the constructor rejects m.
func NewThrottle(m model.Throttle) func(budget.Clock) budget.Budget {
	return func(budget.Clock) budget.Budget {
		b, err := budget.NewThrottle(float64(m.Max)/1000, float64(m.Ratio)/1000)
		if err != nil {
			panic(err)
		}
		return b
	}
}

// InFlightConfig returns the budget configuration that m specifies; m's
// Rule must be model.Envoy, the reference budget's.
func InFlightConfig(m model.InFlight) budget.InFlightConfig {
	return budget.InFlightConfig{Ratio: float64(m.PPM) / 1e6, MinConcurrency: int(m.MinConcurrency)}
}

// NewInFlight returns a factory of the reference InFlight that m
// specifies.
func NewInFlight(m model.InFlight) func(budget.Clock) budget.Budget {
	return func(budget.Clock) budget.Budget {
		b, err := budget.NewInFlight(InFlightConfig(m))
		if err != nil {
			panic(err)
		}
		return b
	}
}

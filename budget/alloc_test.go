package budget_test

import (
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// Every call of every budget allocates nothing.
func TestNoAllocs(t *testing.T) {
	clock := new(budget.ManualClock)
	refill := budget.DefaultTokenBucketConfig()
	refill.RefillPerSecond, refill.Clock = 10, clock
	ratioCfg := budget.DefaultRatioConfig()
	ratioCfg.Clock = clock
	reserveCfg := ratioCfg
	reserveCfg.Reserve = 100
	budgets := []struct {
		name string
		b    budget.Budget
	}{
		{"TokenBucket", newBucket(t, budget.DefaultTokenBucketConfig())},
		{"TokenBucketRefill", newBucket(t, refill)},
		{"Ratio", newRatio(t, ratioCfg)},
		{"RatioReserve", newRatio(t, reserveCfg)},
		{"RatioMonotonicClock", newRatio(t, budget.DefaultRatioConfig())},
		{"Throttle", newThrottle(t, 10, 0.1)},
		{"InFlight", newInFlight(t, budget.DefaultInFlightConfig())},
	}
	for _, tt := range budgets {
		calls := []struct {
			name string
			f    func()
		}{
			{"Request", tt.b.Request},
			{"RetryTransient", func() { tt.b.Retry(budget.Transient) }},
			{"RetryThrottled", func() { tt.b.Retry(budget.Throttled) }},
			{"RetryInvalid", func() { tt.b.Retry(budget.Kind(99)) }},
			{"SuccessFirst", func() { tt.b.Success(budget.FirstAttempt) }},
			{"SuccessTransient", func() { tt.b.Success(budget.Transient) }},
			{"SuccessThrottled", func() { tt.b.Success(budget.Throttled) }},
			{"Available", func() {
				if bb, ok := tt.b.(balancer); ok {
					bb.Available()
				}
			}},
			{"Stats", func() {
				if sb, ok := tt.b.(budget.StatsBudget); ok {
					sb.Stats()
				}
			}},
			{"Ends", func() {
				if ib, ok := tt.b.(budget.InFlightBudget); ok {
					ib.Request()
					if ib.Retry(budget.Transient) {
						ib.AttemptEnd(budget.Transient)
					}
					ib.AttemptEnd(budget.FirstAttempt)
					ib.CallEnd()
				}
			}},
			{"AdvancingClock", func() { clock.Advance(300 * time.Millisecond); tt.b.Request(); tt.b.Retry(budget.Transient) }},
		}
		for _, c := range calls {
			if n := testing.AllocsPerRun(1000, c.f); n != 0 {
				t.Errorf("%s.%s allocates %v times per call, want 0", tt.name, c.name, n)
			}
		}
	}
}

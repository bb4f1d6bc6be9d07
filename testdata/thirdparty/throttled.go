package thirdparty

import (
	"context"

	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// throttledKey is the one key the adapter limits: a budget is one
// allowance shared by every call to a dependency.
const throttledKey = "dependency"

// Throttled adapts github.com/throttled/throttled/v2's GCRA rate limiter,
// on its in-memory store, to budget.Budget: a retry of a retry kind asks
// RateLimitCtx for a quantity of 1 and is granted when the limiter neither
// limits it nor fails (an error, such as the one after maxCASAttempts lost
// compare-and-swaps, denies: a budget that cannot tell fails closed).
// Request and Success tell the limiter nothing.
type Throttled struct{ L *throttled.GCRARateLimiterCtx }

var _ budget.Budget = Throttled{}

// NewThrottled builds the limiter of the subject as throttled's README
// does: memstore.NewCtx(65536) (an LRU of at most 65536 keys, reading
// time.Now), PerSec(10) with a MaxBurst of 9, which permits 10 requests at
// once and then 10 a second.
func NewThrottled() Throttled {
	st, err := memstore.NewCtx(65536)
	if err != nil {
		panic(err)
	}
	l, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerSec(10), MaxBurst: 9})
	if err != nil {
		panic(err)
	}
	return Throttled{L: l}
}

// Request does nothing: throttled does not count first attempts.
func (Throttled) Request() {}

// Retry asks the limiter for one unit for a transient or throttled retry;
// any other kind is denied without asking it.
func (a Throttled) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	limited, _, err := a.L.RateLimitCtx(context.Background(), throttledKey, 1)
	return err == nil && !limited
}

// Success does nothing: throttled gives nothing back for a success.
func (Throttled) Success(budget.Kind) {}

// ThrottledModel is the rule of GCRA with PerSec(10) and MaxBurst 9,
// stated as the token bucket it is equivalent to. throttled keeps a
// theoretical arrival time tat and grants at now when max(tat, now) +
// emissionInterval − now ≤ delayVariationTolerance, then stores that sum
// as the new tat (rate.go, RateLimitCtx). With T = 100 ms (the emission
// interval) and a tolerance of 10 T, the bucket holds 10 − max(tat − now,
// 0)/T tokens: a grant needs one token and takes it (tat moves by T),
// and the bucket refills at one token per T, continuously and exactly in
// nanoseconds, up to 10. In milli-tokens: 10 tokens, 1 a retry, 10 a
// second, nothing back for a success; the same rule as XTimeRateModel.
var ThrottledModel = model.TokenBucket{
	Capacity:        10_000,
	TransientCost:   1_000,
	ThrottledCost:   1_000,
	RefillPerSecond: 10_000,
	NoRefund:        true,
}

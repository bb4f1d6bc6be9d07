package unseen

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// testHook, when set by a test, is called with the name of a point in a
// budget's code where that budget's bug lives, so that the test can run
// another goroutine's call at exactly that point. It is nil in production
// and is only ever set by this package's tests while no other goroutine
// uses a budget.
var testHook func(point string)

// hook calls testHook at point, if a test set it.
func hook(point string) {
	if h := testHook; h != nil {
		h(point)
	}
}

// milli is the number of milli-units in one token (or one retry).
const milli = 1000

// fine is the number of fine units in one milli-token: a token bucket that
// refills keeps its balance in units of 1e-9 milli-tokens, so that the
// fraction a refill earns below one milli-token is carried exactly. A rate
// of r milli-tokens a second earns exactly r fine units a nanosecond.
const fine = int64(time.Second)

// ppm is the fixed-point scale of a ratio: parts per million.
const ppm = 1_000_000

// maxCount is where an in-flight count stops, as the model's do.
const maxCount = 1<<32 - 1

// cost returns the milli-token cost of a retry of kind k in a token bucket
// model, or 0 when k is not a retry kind.
func cost(m model.TokenBucket, k budget.Kind) int64 {
	switch k {
	case budget.Transient:
		return m.TransientCost
	case budget.Throttled:
		return m.ThrottledCost
	}
	return 0
}

// credit returns the milli-tokens a success of kind k deposits.
func credit(m model.TokenBucket, k budget.Kind) int64 {
	if k.IsRetry() && !m.NoRefund {
		return cost(m, k)
	}
	return m.SuccessBonus
}

// refilled returns the balance u (in fine units) refilled at rate
// milli-tokens a second from the instant last to the instant now, capped at
// capU, and the latest instant seen. An instant at or before last refills
// nothing and leaves last as it is (the forward-only rule).
func refilled(u, capU, rate int64, last, now time.Duration) (int64, time.Duration) {
	if now <= last {
		return u, last
	}
	if rate == 0 {
		return u, now
	}
	elapsed := int64(now - last)
	if elapsed < 0 { // now - last overflowed
		elapsed = math.MaxInt64
	}
	if u >= capU {
		return capU, now
	}
	need := capU - u
	if elapsed >= (need+rate-1)/rate {
		return capU, now
	}
	return u + elapsed*rate, now
}

// tokensOf converts a balance in fine units to tokens, as Available reports
// it: whole milli-tokens only.
func tokensOf(u int64) float64 { return float64(u/fine) / milli }

// floorDiv returns a / b rounded towards negative infinity; b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// floorMod returns a mod b in [0, b); b > 0.
func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// ratioLimit returns max(floor, ⌊p × reqs / 1e6⌋ + reserve), the retries a
// ratio window with reqs requests allows, without overflow.
func ratioLimit(m model.Ratio, reqs int64) int64 {
	return max(m.Floor, reqs/ppm*m.PPM+reqs%ppm*m.PPM/ppm+m.Reserve)
}

// envoyLimit returns the retries in flight Envoy's rule allows with calls
// calls in flight: max(MinConcurrency, ⌊PPM × calls / 1e6⌋).
func envoyLimit(m model.InFlight, calls int64) int64 {
	return max(m.MinConcurrency, calls/ppm*m.PPM+calls%ppm*m.PPM/ppm)
}

// incSat adds one to a, stopping at maxCount.
func incSat(a *atomic.Int64) {
	for {
		v := a.Load()
		if v >= maxCount || a.CompareAndSwap(v, v+1) {
			return
		}
	}
}

// decPos takes one from a, ignoring a count already at zero.
func decPos(a *atomic.Int64) {
	for {
		v := a.Load()
		if v <= 0 || a.CompareAndSwap(v, v-1) {
			return
		}
	}
}

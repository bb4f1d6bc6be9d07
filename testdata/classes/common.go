package classes

import (
	"math/bits"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// testHook, when a test sets it, is called with the name of a point in a
// budget's code where that budget's bug lives, so that the test can run
// another goroutine's calls at exactly that point. It is nil outside this
// package's tests, and tests set it only while no other goroutine uses a
// budget.
var testHook func(point string)

// hook calls testHook at point, if a test set it.
func hook(point string) {
	if h := testHook; h != nil {
		h(point)
	}
}

// milli is the number of milli-units in one token (or one retry).
const milli = 1000

// fine is the number of fine units in one milli-token. A bucket that refills
// keeps its balance in fine units, so that what a refill earns below one
// milli-token is carried exactly: a rate of r milli-tokens a second earns r
// fine units a nanosecond.
const fine = int64(time.Second)

// ppm is the fixed-point scale of a share: parts per million.
const ppm = 1_000_000

// maxCount is where an in-flight count stops, as the model's do.
const maxCount = 1<<32 - 1

// cost returns the milli-token cost of a retry of kind k, or 0 when k is not
// a retry kind.
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

// refill returns the balance u (fine units) refilled at rate milli-tokens a
// second from the instant last to the instant now, capped at capU, and the
// latest instant seen. An instant at or before last refills nothing and
// leaves last as it is (the forward-only rule).
func refill(u, capU, rate int64, last, now time.Duration) (int64, time.Duration) {
	if now <= last {
		return u, last
	}
	if rate == 0 {
		return u, now
	}
	if u >= capU {
		return capU, now
	}
	elapsed := uint64(now) - uint64(last) // the true distance, even past int64
	need := uint64(capU - u)
	if elapsed >= (need+uint64(rate)-1)/uint64(rate) {
		return capU, now
	}
	return u + int64(elapsed)*rate, now
}

// tokensOf converts a balance in fine units to tokens as Available reports
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

// ratioLimit returns max(Floor, ⌊PPM × reqs / 1e6⌋ + Reserve): the most
// retries a window holding reqs requests allows.
func ratioLimit(m model.Ratio, reqs int64) int64 {
	hi, lo := bits.Mul64(uint64(reqs), uint64(m.PPM))
	q, _ := bits.Div64(hi, lo, ppm)
	return max(m.Floor, int64(q)+m.Reserve)
}

// envoyLimit returns max(MinConcurrency, ⌊PPM × calls / 1e6⌋): the retries
// in flight Envoy's rule allows with calls calls in flight.
func envoyLimit(m model.InFlight, calls int64) int64 {
	return max(m.MinConcurrency, m.PPM*calls/ppm)
}

// failsafeAdmits reports whether failsafe-go's rule admits one more retry
// with retries retries and calls calls in flight: fewer retries than
// MinConcurrency, or a share of the executions (calls + retries) no more
// than PPM.
func failsafeAdmits(m model.InFlight, retries, calls int64) bool {
	return retries < m.MinConcurrency || retries*ppm <= m.PPM*(calls+retries)
}

// failsafeLimit returns the least count of retries in flight that
// failsafe-go's rule does not admit with calls calls in flight.
func failsafeLimit(m model.InFlight, calls int64) int64 {
	if m.PPM >= ppm {
		return maxCount
	}
	return min(max(m.PPM*calls/(ppm-m.PPM)+1, m.MinConcurrency), maxCount)
}

// ifAvailable returns the retries a limit still allows with retries in
// flight, as Available reports it.
func ifAvailable(limit, retries int64) float64 {
	if retries >= limit {
		return 0
	}
	return float64(limit - retries)
}

package designs

import (
	"math/bits"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// milli is the number of milli-units in one token (or one retry).
const milli = 1000

// ppm is the fixed-point scale of a ratio: parts per million.
const ppm = 1_000_000

// maxInFlight is where an in-flight count stops.
const maxInFlight = 1<<32 - 1

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

// later returns the instant a budget acts at when the clock reads now and
// the latest reading it has seen is seen: the later of the two. A clock
// that went back therefore refills and expires nothing twice.
func later(seen, now time.Duration) time.Duration {
	if now > seen {
		return now
	}
	return seen
}

// BucketConfig configures a token bucket, in milli-tokens (1 token = 1000)
// and milli-tokens a second.
type BucketConfig struct {
	Capacity        int64
	TransientCost   int64
	ThrottledCost   int64
	SuccessBonus    int64
	RefillPerSecond int64 // 0: no refill, and the clock is never read
	NoRefund        bool  // a successful retry earns SuccessBonus, not its cost back
}

// cost is what a retry of kind k withdraws; k is a retry kind.
func (c BucketConfig) cost(k budget.Kind) int64 {
	if k == budget.Throttled {
		return c.ThrottledCost
	}
	return c.TransientCost
}

// credit is what a success of kind k deposits.
func (c BucketConfig) credit(k budget.Kind) int64 {
	if k.IsRetry() && !c.NoRefund {
		return c.cost(k)
	}
	return c.SuccessBonus
}

// bucketState is a token bucket's whole state.
type bucketState struct {
	tokens int64         // milli-tokens
	frac   int64         // refill earned below one milli-token, in 1e-9 milli-tokens
	seen   time.Duration // latest clock reading seen (with refill only)
}

// newBucketState returns a full bucket built at clock reading now.
func (c BucketConfig) newBucketState(now time.Duration) bucketState {
	s := bucketState{tokens: c.Capacity}
	if c.RefillPerSecond > 0 {
		s.seen = now
	}
	return s
}

// observe refills s for the time from its latest reading to now. A rate of
// r milli-tokens a second earns r units of 1e-9 milli-token a nanosecond,
// so the product is exact; it is taken in 128 bits, since the elapsed time
// may be anything up to 2^64 - 1 ns.
func (c BucketConfig) observe(s bucketState, now time.Duration) bucketState {
	if c.RefillPerSecond == 0 {
		return s
	}
	from := s.seen
	s.seen = later(s.seen, now)
	elapsed := uint64(s.seen) - uint64(from) // the true distance, even past 2^63
	hi, lo := bits.Mul64(elapsed, uint64(c.RefillPerSecond))
	lo, carry := bits.Add64(lo, uint64(s.frac), 0)
	hi += carry
	room := uint64(c.Capacity-s.tokens) * uint64(time.Second)
	if hi != 0 || lo >= room {
		s.tokens, s.frac = c.Capacity, 0
		return s
	}
	s.tokens += int64(lo / uint64(time.Second))
	s.frac = int64(lo % uint64(time.Second))
	return s
}

// retry applies Retry(k) at clock reading now (k is a retry kind).
func (c BucketConfig) retry(s bucketState, now time.Duration, k budget.Kind) (bucketState, bool) {
	s = c.observe(s, now)
	if s.tokens < c.cost(k) {
		return s, false
	}
	s.tokens -= c.cost(k)
	return s, true
}

// success applies Success(k) at clock reading now.
func (c BucketConfig) success(s bucketState, now time.Duration, k budget.Kind) bucketState {
	s = c.observe(s, now)
	s.tokens += c.credit(k)
	if s.tokens >= c.Capacity {
		s.tokens, s.frac = c.Capacity, 0
	}
	return s
}

// RatioConfig configures a sliding-window ratio budget: a retry is granted
// while the retries in the window, this one included, are at most
// max(Floor, ⌊PPM × requests in the window / 1e6⌋ + Reserve). The window is
// Slots slots of Window/Slots nanoseconds (rounded down).
type RatioConfig struct {
	PPM     int64
	Window  time.Duration
	Slots   int64
	Floor   int64
	Reserve int64
}

func (c RatioConfig) width() int64 { return int64(c.Window) / c.Slots }

// slot returns the number of the slot instant t falls in.
func (c RatioConfig) slot(t time.Duration) int64 { return floorDiv(int64(t), c.width()) }

// inWindow reports whether slot n is in the window whose newest slot is h;
// n <= h. The unsigned difference is the true distance even when h - n
// overflows int64.
func (c RatioConfig) inWindow(n, h int64) bool { return uint64(h)-uint64(n) < uint64(c.Slots) }

// limit returns how many retries the window allows with reqs requests in it.
func (c RatioConfig) limit(reqs int64) int64 {
	allowed := reqs/ppm*c.PPM + reqs%ppm*c.PPM/ppm + c.Reserve
	return max(c.Floor, allowed)
}

// grants reports whether one more retry fits a window of reqs requests and
// retries retries.
func (c RatioConfig) grants(reqs, retries int64) bool { return retries < c.limit(reqs) }

// available returns the retries a window would still grant, in tokens.
func (c RatioConfig) available(reqs, retries int64) float64 {
	if l := c.limit(reqs); retries < l {
		return float64(l - retries)
	}
	return 0
}

// ThrottleConfig configures gRPC retry throttling (gRFC A6), in
// milli-tokens: the count starts at Max, a retryable failure takes one
// token (down to 0) and a retry is granted when what is left is more than
// Max/2; a success adds Ratio, up to Max.
type ThrottleConfig struct {
	Max   int64
	Ratio int64
}

// retry returns the count after a retryable failure, and whether the retry
// is granted.
func (c ThrottleConfig) retry(tokens int64) (int64, bool) {
	n := max(tokens-milli, 0)
	return n, 2*n > c.Max
}

// success returns the count after a success.
func (c ThrottleConfig) success(tokens int64) int64 { return min(tokens+c.Ratio, c.Max) }

// InFlightConfig configures a budget that caps the retries in flight
// against the calls in flight. With Failsafe false it is Envoy's rule: a
// retry is granted while the retries in flight are fewer than
// max(MinConcurrency, ⌊PPM × calls / 1e6⌋). With Failsafe true it is
// failsafe-go's: a retry is denied when the retries in flight are at least
// MinConcurrency and retries / (calls + retries) > PPM / 1e6.
type InFlightConfig struct {
	PPM            int64
	MinConcurrency int64
	Failsafe       bool
}

// admits reports whether one more retry may start with active retries and
// calls calls in flight.
func (c InFlightConfig) admits(active, calls int64) bool {
	if active >= maxInFlight {
		return false
	}
	if active < c.MinConcurrency {
		return true
	}
	if c.Failsafe {
		return active*ppm <= c.PPM*(calls+active)
	}
	return active < c.PPM*calls/ppm
}

// available returns how many more retries would be granted with active
// retries and calls calls in flight and nothing else happening, in
// retries: the least active count the rule refuses, less active.
func (c InFlightConfig) available(active, calls int64) float64 {
	var l int64
	switch {
	case !c.Failsafe:
		l = c.PPM * calls / ppm
	case c.PPM >= ppm:
		l = maxInFlight
	default:
		// active×1e6 <= PPM×(calls+active) ⟺ active <= PPM×calls/(1e6-PPM)
		l = c.PPM*calls/(ppm-c.PPM) + 1
	}
	l = min(max(l, c.MinConcurrency), maxInFlight)
	if active >= l {
		return 0
	}
	return float64(l - active)
}

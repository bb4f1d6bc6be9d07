package zoo

import (
	"math"
	"sync"

	"github.com/retrybudget/retrybudget/budget"
)

// FloatBucket is a token bucket with time-based refill, guarded by a
// sync.Mutex, whose balance is a float64 of tokens. It answers exactly as a
// bucket kept in milli-tokens would: quantities are rounded to whole
// milli-tokens when it is built, a retry is granted when the whole
// milli-tokens of the balance cover its cost, and after every change the
// balance is snapped to the nearest multiple of 1e-12 token (1e-9
// milli-token, the finest amount refill produces), so float rounding never
// accumulates. Every amount it adds or subtracts is then a whole number of
// those units held exactly in a float64.
//
// The snapping is exact while the capacity is at most 1000 tokens: a
// float64 near 1000 is within 1.2e-13 token of its true value, well under
// half a unit.
type FloatBucket struct {
	capacity, transient, throttled, bonus float64 // tokens, whole milli-tokens each
	perSec                                float64 // tokens per second, whole milli-tokens
	clock                                 budget.Clock

	mu     sync.Mutex
	tokens float64 // on the 1e-12 grid
	seen   int64   // latest clock reading seen, ns
}

// unitsPerToken is the grid the balance is kept on: 1e-9 milli-token.
const unitsPerToken = 1e12

// toMilli rounds x tokens to whole milli-tokens, in tokens.
func toMilli(x float64) float64 { return math.Round(x*1000) / 1000 }

// units returns x tokens as a whole number of 1e-12 tokens.
func units(x float64) float64 { return math.Round(x * unitsPerToken) }

// NewFloatBucket returns a full bucket; quantities are in tokens and
// rounded to milli-tokens, as the budget package's TokenBucket rounds them.
func NewFloatBucket(capacity, transient, throttled, bonus, perSec float64, clock budget.Clock) *FloatBucket {
	return &FloatBucket{
		capacity: toMilli(capacity), transient: toMilli(transient), throttled: toMilli(throttled),
		bonus: toMilli(bonus), perSec: toMilli(perSec), clock: clock,
		tokens: toMilli(capacity), seen: int64(clock.Now()),
	}
}

// wholeMilli returns the whole milli-tokens in a balance of x tokens.
func wholeMilli(x float64) float64 { return math.Floor(units(x) / 1e9) }

// refilled returns the balance x brought from instant seen to now.
func (b *FloatBucket) refilled(x float64, seen, now int64) float64 {
	if now <= seen {
		return x
	}
	elapsed := float64(uint64(now) - uint64(seen)) // ns; inexact only when huge, and then the bucket fills
	earned := elapsed * (units(b.perSec) / 1e9)    // units per ns = perSec in milli-tokens, a whole number; exact below 2^53
	if earned >= units(b.capacity)-units(x) {
		return b.capacity
	}
	return (units(x) + earned) / unitsPerToken
}

// observe reads the clock and brings the balance up to date. b.mu is held.
func (b *FloatBucket) observe() {
	if now := int64(b.clock.Now()); now > b.seen {
		b.tokens = b.refilled(b.tokens, b.seen, now)
		b.seen = now
	}
}

// Request does nothing: a first attempt is free.
func (b *FloatBucket) Request() {}

// Retry withdraws the cost of a retry of kind k if the whole milli-tokens of
// the balance cover it.
func (b *FloatBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	cost := b.transient
	if k == budget.Throttled {
		cost = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.observe()
	if wholeMilli(b.tokens) < wholeMilli(cost) {
		return false
	}
	b.tokens = (units(b.tokens) - units(cost)) / unitsPerToken
	return true
}

// Success deposits the refund of a retry of kind k, or the bonus, up to
// capacity; a full bucket carries no fraction.
func (b *FloatBucket) Success(k budget.Kind) {
	credit := b.bonus
	switch k {
	case budget.Transient:
		credit = b.transient
	case budget.Throttled:
		credit = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.observe()
	b.tokens = (units(b.tokens) + units(credit)) / unitsPerToken
	if wholeMilli(b.tokens) >= wholeMilli(b.capacity) {
		b.tokens = b.capacity
	}
}

// Available returns the whole milli-tokens of the balance, in tokens, as of
// the clock's current reading, changing nothing.
func (b *FloatBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	x := b.tokens
	if now := int64(b.clock.Now()); now > b.seen {
		x = b.refilled(x, b.seen, now)
	}
	return wholeMilli(x) / 1000
}

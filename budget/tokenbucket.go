package budget

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Limits on TokenBucketConfig, chosen so that no intermediate value of the
// fixed-point refill arithmetic can overflow int64.
const (
	maxBucketCapacity = 1_000_000 // tokens
	maxBucketRefill   = 1_000_000 // tokens per second
)

// TokenBucketConfig configures a [TokenBucket]. Quantities are in tokens and
// are kept to three decimals (milli-tokens); finer values are rounded.
// Start from [DefaultTokenBucketConfig] and change what you need.
type TokenBucketConfig struct {
	// Capacity is both the starting balance and the most the bucket holds.
	// It must be in [0.001, 1000000].
	Capacity float64
	// TransientCost is charged for a retry after a Transient failure.
	// It must be in [0.001, Capacity].
	TransientCost float64
	// ThrottledCost is charged for a retry after a Throttled failure.
	// It must be in [0.001, Capacity].
	ThrottledCost float64
	// SuccessBonus is credited when a first attempt succeeds (and, with
	// NoRefund, when a retry succeeds). It must be in [0, Capacity].
	SuccessBonus float64
	// NoRefund makes a successful retry earn SuccessBonus instead of the
	// refund of its own cost. The AWS SDK refunds; the bucket of the article "Retry budgets by language: Python, Go, and JavaScript" does not.
	NoRefund bool
	// RefillPerSecond is added continuously as time passes, up to Capacity.
	// It must be in [0, 1000000]. Zero disables refill, and the bucket then
	// never reads its Clock.
	RefillPerSecond float64
	// Clock is read when RefillPerSecond > 0. Nil means NewMonotonicClock().
	Clock Clock
}

// DefaultTokenBucketConfig returns the retry quota of the AWS SDK for Go v2
// (v1.48.0, standard retryer): 500 tokens, a transient retry costs 14, a
// throttled retry costs 5, a successful first attempt earns 1, a successful
// retry refunds its cost, and there is no time-based refill.
func DefaultTokenBucketConfig() TokenBucketConfig {
	return TokenBucketConfig{
		Capacity:      500,
		TransientCost: 14,
		ThrottledCost: 5,
		SuccessBonus:  1,
	}
}

// A TokenBucket is a retry budget kept as a balance of tokens.
//
// A retry is granted when the balance covers its cost, and the cost is then
// withdrawn. A successful first attempt deposits SuccessBonus; a successful
// retry deposits its own cost back (or SuccessBonus, with NoRefund); with
// RefillPerSecond set, the balance also grows with time. The balance never
// exceeds Capacity. When failures outpace successes the bucket drains and
// retries stop until successes or time refill it.
//
// Without refill, every call is one compare-and-swap loop on one word; with
// refill, calls take a mutex and read the Clock inside it. Either way a call
// allocates nothing.
//
// The zero value denies every retry; use [NewTokenBucket].
// Most callers want [TokenBucket.Retry].
//
// TokenBucket is safe for concurrent use by multiple goroutines.
type TokenBucket struct {
	// Read-only after construction.
	capacity int64
	cost     [3]int64 // indexed by Kind; cost[FirstAttempt] is unused
	bonus    int64
	refill   int64 // milli-tokens per second; 0 means none
	noRefund bool
	clock    Clock

	_ cacheLinePad
	// tokens is the balance in milli-tokens. Without refill it is changed
	// only by compare-and-swap; with refill only while mu is held.
	tokens atomic.Int64
	counts counts
	_      cacheLinePad

	mu   sync.Mutex    // guards acc and last; used only with refill
	acc  int64         // fraction of a milli-token, in units of 1e-9
	last time.Duration // latest Clock reading seen
}

var _ Budget = (*TokenBucket)(nil)

// NewTokenBucket returns a full TokenBucket configured by c, or an error
// wrapping [ErrInvalidConfig] that names the first field out of range.
func NewTokenBucket(c TokenBucketConfig) (*TokenBucket, error) {
	capacity, err := milliRange("TokenBucketConfig.Capacity", c.Capacity, 1, maxBucketCapacity*milli, "in [0.001, 1000000]")
	if err != nil {
		return nil, err
	}
	want := "in [0.001, Capacity=" + formatMilli(capacity) + "]"
	transient, err := milliRange("TokenBucketConfig.TransientCost", c.TransientCost, 1, capacity, want)
	if err != nil {
		return nil, err
	}
	throttled, err := milliRange("TokenBucketConfig.ThrottledCost", c.ThrottledCost, 1, capacity, want)
	if err != nil {
		return nil, err
	}
	bonus, err := milliRange("TokenBucketConfig.SuccessBonus", c.SuccessBonus, 0, capacity, "in [0, Capacity="+formatMilli(capacity)+"]")
	if err != nil {
		return nil, err
	}
	refill, err := milliRange("TokenBucketConfig.RefillPerSecond", c.RefillPerSecond, 0, maxBucketRefill*milli, "in [0, 1000000]")
	if err != nil {
		return nil, err
	}
	b := &TokenBucket{
		capacity: capacity,
		cost:     [3]int64{FirstAttempt: 0, Transient: transient, Throttled: throttled},
		bonus:    bonus,
		refill:   refill,
		noRefund: c.NoRefund,
	}
	b.tokens.Store(capacity)
	if refill > 0 {
		b.clock = c.Clock
		if b.clock == nil {
			b.clock = NewMonotonicClock()
		}
		b.last = b.clock.Now()
	}
	return b, nil
}

// Request does nothing: a first attempt is free.
func (b *TokenBucket) Request() {}

// Retry withdraws the cost of a retry of the given kind and reports true, or
// reports false and changes nothing when the balance is short or kind is not
// a retry kind.
func (b *TokenBucket) Retry(kind Kind) bool { return b.counts.count(b.retry(kind)) }

// Stats returns the retries granted and denied so far.
func (b *TokenBucket) Stats() Stats { return b.counts.stats() }

func (b *TokenBucket) retry(kind Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	cost := b.cost[kind]
	if cost == 0 { // zero value
		return false
	}
	if b.refill > 0 {
		b.mu.Lock()
		defer b.mu.Unlock()
		t := b.refillLocked(b.clock.Now())
		if t < cost {
			return false
		}
		b.tokens.Store(t - cost)
		return true
	}
	for {
		t := b.tokens.Load()
		if t < cost {
			return false
		}
		if b.tokens.CompareAndSwap(t, t-cost) {
			return true
		}
	}
}

// Success deposits the refund of a successful retry of the given kind, or
// SuccessBonus for a successful first attempt, up to Capacity.
func (b *TokenBucket) Success(kind Kind) {
	credit := b.bonus
	if kind.IsRetry() && !b.noRefund {
		credit = b.cost[kind]
	}
	if b.refill > 0 {
		b.mu.Lock()
		defer b.mu.Unlock()
		t := min(b.refillLocked(b.clock.Now())+credit, b.capacity)
		if t == b.capacity {
			b.acc = 0
		}
		b.tokens.Store(t)
		return
	}
	if credit == 0 {
		return
	}
	for {
		t := b.tokens.Load()
		n := min(t+credit, b.capacity)
		if n == t || b.tokens.CompareAndSwap(t, n) {
			return
		}
	}
}

// Available returns the balance in tokens, including any refill due by now.
// It changes nothing. By the time it returns, other goroutines may have
// changed the balance; use it for metrics, never to decide a retry.
func (b *TokenBucket) Available() float64 {
	if b.refill == 0 {
		return fromMilli(b.tokens.Load())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t, _, _ := b.refilled(b.tokens.Load(), b.acc, b.last, b.clock.Now())
	return fromMilli(t)
}

// refillLocked brings the balance up to date with the clock reading now and
// returns it. b.mu must be held.
func (b *TokenBucket) refillLocked(now time.Duration) int64 {
	t, acc, last := b.refilled(b.tokens.Load(), b.acc, b.last, now)
	b.tokens.Store(t)
	b.acc, b.last = acc, last
	return t
}

// refilled computes the balance, fraction and latest instant after a refill
// from last to now. An instant earlier than last counts as last, so time
// that goes backwards refills nothing, and nothing twice.
//
// The fraction acc carries what a step earned below one milli-token, so many
// small steps add up to exactly what one large step would.
func (b *TokenBucket) refilled(t, acc int64, last, now time.Duration) (int64, int64, time.Duration) {
	if now <= last {
		return t, acc, last
	}
	// The distance as unsigned is exact even where now - last overflows
	// int64; more time than int64 holds counts as the most it holds.
	elapsed := int64(min(uint64(now)-uint64(last), math.MaxInt64))
	if t >= b.capacity {
		return b.capacity, 0, now
	}
	// need is what fills the bucket, in units of 1e-9 milli-token; it fits
	// in int64 because capacity is at most 1e9 milli-tokens.
	need := (b.capacity-t)*nsPerSecond - acc
	if elapsed >= (need+b.refill-1)/b.refill {
		return b.capacity, 0, now
	}
	// elapsed*b.refill < need here, so it cannot overflow.
	acc += elapsed * b.refill
	return t + acc/nsPerSecond, acc % nsPerSecond, now
}

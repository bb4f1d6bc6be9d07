package wild

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// TickRefillBucket is a refilling token bucket that refills in whole
// milliseconds, keeping the sub-millisecond rest of the time for later
// (degenerate constants: exact while the clock moves in whole milliseconds,
// late by up to a tick after any other step).
type TickRefillBucket struct {
	capacity, transient, throttled, bonus int64
	perTick                               int64 // milli-tokens per millisecond
	clock                                 budget.Clock

	mu    sync.Mutex
	milli int64
	last  int64 // the instant refill has been paid up to; moves in whole ticks
}

// NewTickRefillBucket returns a full bucket (milli-tokens) refilling perSec
// milli-tokens a second.
func NewTickRefillBucket(capacity, transient, throttled, bonus, perSec int64, clock budget.Clock) *TickRefillBucket {
	return &TickRefillBucket{capacity: capacity, transient: transient, throttled: throttled, bonus: bonus,
		perTick: perSec / 1000, clock: clock, milli: capacity, last: int64(clock.Now())}
}

// refilled returns the balance and paid-up instant at the clock reading now.
func (b *TickRefillBucket) refilled(now int64) (int64, int64) {
	if now <= b.last {
		return b.milli, b.last
	}
	ticks := (uint64(now) - uint64(b.last)) / uint64(time.Millisecond)
	if ticks >= uint64((b.capacity-b.milli+b.perTick-1)/b.perTick) {
		return b.capacity, now
	}
	return b.milli + int64(ticks)*b.perTick, b.last + int64(ticks)*int64(time.Millisecond)
}

// Request does nothing.
func (b *TickRefillBucket) Request() {}

// Retry refills, then withdraws the cost of k if the balance covers it.
func (b *TickRefillBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	cost := b.transient
	if k == budget.Throttled {
		cost = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.milli, b.last = b.refilled(int64(b.clock.Now()))
	if b.milli < cost {
		return false
	}
	b.milli -= cost
	return true
}

// Success refills, then credits the refund or the bonus, up to capacity.
func (b *TickRefillBucket) Success(k budget.Kind) {
	credit := b.bonus
	switch k {
	case budget.Transient:
		credit = b.transient
	case budget.Throttled:
		credit = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.milli, b.last = b.refilled(int64(b.clock.Now()))
	if b.milli = min(b.milli+credit, b.capacity); b.milli == b.capacity {
		b.last = max(b.last, int64(b.clock.Now()))
	}
}

// Available returns the balance in tokens as of now.
func (b *TickRefillBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, _ := b.refilled(int64(b.clock.Now()))
	return float64(m) / 1000
}

// WholeTokenHalfThrottle is gRPC retry throttling that computes half of
// maxTokens in whole tokens (degenerate constants: exact for an even
// maxTokens; for 7 it grants while more than 3 are left, not 3.5).
type WholeTokenHalfThrottle struct {
	max, ratio, half int64 // milli-tokens
	milli            atomic.Int64
}

// NewWholeTokenHalfThrottle returns a full throttle; arguments are in tokens.
func NewWholeTokenHalfThrottle(maxTokens, tokenRatio float64) *WholeTokenHalfThrottle {
	t := &WholeTokenHalfThrottle{
		max:   int64(math.Round(maxTokens * 1000)),
		ratio: int64(math.Round(tokenRatio * 1000)),
		half:  int64(maxTokens) / 2 * 1000,
	}
	t.milli.Store(t.max)
	return t
}

// Request does nothing.
func (t *WholeTokenHalfThrottle) Request() {}

// Retry takes a token and grants while more than half of max is left.
func (t *WholeTokenHalfThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	for {
		old := t.milli.Load()
		n := max(old-1000, 0)
		if t.milli.CompareAndSwap(old, n) {
			return n > t.half
		}
	}
}

// Success adds ratio, up to max.
func (t *WholeTokenHalfThrottle) Success(budget.Kind) {
	for {
		old := t.milli.Load()
		if t.milli.CompareAndSwap(old, min(old+t.ratio, t.max)) {
			return
		}
	}
}

// Available returns the count in tokens.
func (t *WholeTokenHalfThrottle) Available() float64 { return float64(t.milli.Load()) / 1000 }

// WholeTokenCostBucket is a lock-free token bucket that converts its costs
// to milli-tokens through whole tokens (degenerate constants: exact for
// whole-token costs; a cost of 2.5 tokens is charged as 2 but refunded as 2,
// so the bucket grants more retries than the model).
type WholeTokenCostBucket struct {
	capacity, transient, throttled, bonus int64
	milli                                 atomic.Int64
}

// NewWholeTokenCostBucket returns a full bucket; arguments are in tokens.
func NewWholeTokenCostBucket(capacity, transient, throttled, bonus float64) *WholeTokenCostBucket {
	b := &WholeTokenCostBucket{
		capacity:  int64(math.Round(capacity * 1000)),
		transient: int64(transient) * 1000,
		throttled: int64(throttled) * 1000,
		bonus:     int64(math.Round(bonus * 1000)),
	}
	b.milli.Store(b.capacity)
	return b
}

// Request does nothing.
func (b *WholeTokenCostBucket) Request() {}

// Retry withdraws the cost of k if the balance covers it.
func (b *WholeTokenCostBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	cost := b.transient
	if k == budget.Throttled {
		cost = b.throttled
	}
	for {
		old := b.milli.Load()
		if old < cost {
			return false
		}
		if b.milli.CompareAndSwap(old, old-cost) {
			return true
		}
	}
}

// Success credits the refund or the bonus, up to capacity.
func (b *WholeTokenCostBucket) Success(k budget.Kind) {
	credit := b.bonus
	switch k {
	case budget.Transient:
		credit = b.transient
	case budget.Throttled:
		credit = b.throttled
	}
	for {
		old := b.milli.Load()
		if b.milli.CompareAndSwap(old, min(old+credit, b.capacity)) {
			return
		}
	}
}

// Available returns the balance in tokens.
func (b *WholeTokenCostBucket) Available() float64 { return float64(b.milli.Load()) / 1000 }

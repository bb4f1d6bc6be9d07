package escapes

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// Tick64BucketModel is the rule Tick64Bucket follows: the bucket of "Retry
// budgets by language": 40 tokens, refilled at 1 a second, 1 per retry of
// either kind, +0.1 per success, no refund.
var Tick64BucketModel = model.TokenBucket{Capacity: 40_000, TransientCost: 1_000, ThrottledCost: 1_000, SuccessBonus: 100, RefillPerSecond: 1_000, NoRefund: true}

// Tick32BucketModel is the rule Tick32Bucket claims to follow: the same as
// Tick64BucketModel.
var Tick32BucketModel = Tick64BucketModel

const nsPerMilli = 1_000_000

// ---------------------------------------------------------------------------
// Tick32Bucket: the mutant.

// Tick32Bucket is a token bucket with refill that keeps the instant of its
// last refill as a 32-bit millisecond tick plus the nanoseconds into that
// millisecond, in the manner of kernel jiffies: the difference of two ticks
// is taken modulo 2^32 ("right across the wrap"), and a difference that is
// negative as an int32 means the clock went back, which refills nothing.
// The refill itself is exact to the nanosecond.
//
// BUG (deliberate): the tick only tells instants apart within 2^31 ms (24.9
// days). After an idle gap of 2^32 ms (49.7 days) the tick difference wraps
// to the gap mod 2^32 ms, so a bucket drained before the gap earns next to
// nothing for it (the model: full) and denies retries; a gap in [2^31 ms,
// 2^32 ms) reads as the clock going back, and earns nothing either.
type Tick32Bucket struct {
	clock budget.Clock

	mu       sync.Mutex
	t        tokens
	lastTick uint32 // clock reading of the last refill, in whole ms mod 2^32
	lastSub  int64  // and the nanoseconds into that millisecond
}

var _ budget.Budget = (*Tick32Bucket)(nil)

// NewTick32Bucket returns a full Tick32Bucket following m, on clock.
func NewTick32Bucket(m model.TokenBucket, clock budget.Clock) *Tick32Bucket {
	b := &Tick32Bucket{clock: clock, t: newTokens(m)}
	b.lastTick, b.lastSub = splitMilli(int64(clock.Now()))
	return b
}

func splitMilli(now int64) (tick uint32, sub int64) {
	return uint32(floorDiv(now, nsPerMilli)), floorMod(now, nsPerMilli)
}

// refill brings the balance up to the clock. b.mu must be held.
func (b *Tick32Bucket) refill() {
	tick, sub := splitMilli(int64(b.clock.Now()))
	dt := tick - b.lastTick
	if int32(dt) < 0 {
		return // the clock went back: as at the last refill
	}
	elapsed := int64(dt)*nsPerMilli + sub - b.lastSub
	if elapsed <= 0 {
		return
	}
	b.lastTick, b.lastSub = tick, sub
	b.t.earn(uint64(elapsed))
}

// Request does nothing: a first attempt is free.
func (b *Tick32Bucket) Request() {}

// Retry withdraws the cost of a retry of a retry kind if the balance covers it.
func (b *Tick32Bucket) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	return b.t.take(kind)
}

// Success deposits SuccessBonus, or a retry's refund, up to Capacity.
func (b *Tick32Bucket) Success(kind budget.Kind) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	b.t.deposit(kind)
}

// ---------------------------------------------------------------------------
// Tick64Bucket: the twin.

// Tick64Bucket is Tick32Bucket with the last refill kept as the full int64
// clock reading in nanoseconds: the gap is the unsigned distance between
// two readings, exact for any gap, and a reading earlier than the latest
// one seen counts as that one. It follows Tick64BucketModel (or the
// model.TokenBucket it is built with) exactly.
type Tick64Bucket struct {
	mu sync.Mutex
	t  tokens
	f  forward
}

var _ budget.Budget = (*Tick64Bucket)(nil)

// NewTick64Bucket returns a full Tick64Bucket following m, on clock.
func NewTick64Bucket(m model.TokenBucket, clock budget.Clock) *Tick64Bucket {
	return &Tick64Bucket{t: newTokens(m), f: newForward(clock)}
}

// Request does nothing: a first attempt is free.
func (b *Tick64Bucket) Request() {}

// Retry withdraws the cost of a retry of a retry kind if the balance covers it.
func (b *Tick64Bucket) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.t.earn(b.f.observe())
	return b.t.take(kind)
}

// Success deposits SuccessBonus, or a retry's refund, up to Capacity.
func (b *Tick64Bucket) Success(kind budget.Kind) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.t.earn(b.f.observe())
	b.t.deposit(kind)
}

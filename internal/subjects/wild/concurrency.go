package wild

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// CheckThenActBucket is a token bucket whose Retry loads the balance,
// compares it with the cost and stores the difference (concurrency:
// check-then-act without compare-and-swap, so two retries can both spend the
// last tokens and one withdrawal overwrites the other).
type CheckThenActBucket struct {
	capacity, transient, throttled, bonus int64
	milli                                 atomic.Int64
}

// NewCheckThenActBucket returns a full bucket (milli-tokens).
func NewCheckThenActBucket(capacity, transient, throttled, bonus int64) *CheckThenActBucket {
	b := &CheckThenActBucket{capacity: capacity, transient: transient, throttled: throttled, bonus: bonus}
	b.milli.Store(capacity)
	return b
}

// Request does nothing.
func (b *CheckThenActBucket) Request() {}

// Retry withdraws the cost of k if the balance covers it.
func (b *CheckThenActBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	cost := b.transient
	if k == budget.Throttled {
		cost = b.throttled
	}
	t := b.milli.Load()
	if t < cost {
		return false
	}
	preempt()
	b.milli.Store(t - cost)
	return true
}

// Success credits the refund or the bonus, up to capacity.
func (b *CheckThenActBucket) Success(k budget.Kind) {
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
func (b *CheckThenActBucket) Available() float64 { return float64(b.milli.Load()) / 1000 }

// LostChargeBucket is a token bucket whose Retry is a correct
// compare-and-swap loop but whose Success loads, adds and stores
// (concurrency: a lost update on Success, which writes back a balance from
// before a concurrent withdrawal and so un-charges a granted retry).
type LostChargeBucket struct {
	capacity, transient, throttled, bonus int64
	milli                                 atomic.Int64
}

// NewLostChargeBucket returns a full bucket (milli-tokens).
func NewLostChargeBucket(capacity, transient, throttled, bonus int64) *LostChargeBucket {
	b := &LostChargeBucket{capacity: capacity, transient: transient, throttled: throttled, bonus: bonus}
	b.milli.Store(capacity)
	return b
}

// Request does nothing.
func (b *LostChargeBucket) Request() {}

// Retry withdraws the cost of k if the balance covers it.
func (b *LostChargeBucket) Retry(k budget.Kind) bool {
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
func (b *LostChargeBucket) Success(k budget.Kind) {
	credit := b.bonus
	switch k {
	case budget.Transient:
		credit = b.transient
	case budget.Throttled:
		credit = b.throttled
	}
	t := b.milli.Load()
	preempt()
	b.milli.Store(min(t+credit, b.capacity))
}

// Available returns the balance in tokens.
func (b *LostChargeBucket) Available() float64 { return float64(b.milli.Load()) / 1000 }

// SplitLockBucket is a token bucket that holds its mutex while it checks the
// balance but withdraws after releasing it (concurrency: a lock around the
// check but not the act, so concurrent retries overdraw the bucket).
type SplitLockBucket struct {
	capacity, transient, throttled, bonus int64

	mu    sync.Mutex
	milli atomic.Int64
}

// NewSplitLockBucket returns a full bucket (milli-tokens).
func NewSplitLockBucket(capacity, transient, throttled, bonus int64) *SplitLockBucket {
	b := &SplitLockBucket{capacity: capacity, transient: transient, throttled: throttled, bonus: bonus}
	b.milli.Store(capacity)
	return b
}

// Request does nothing.
func (b *SplitLockBucket) Request() {}

// Retry withdraws the cost of k if the balance covers it.
func (b *SplitLockBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	cost := b.transient
	if k == budget.Throttled {
		cost = b.throttled
	}
	b.mu.Lock()
	ok := b.milli.Load() >= cost
	b.mu.Unlock()
	if ok {
		preempt()
		b.milli.Add(-cost)
	}
	return ok
}

// Success credits the refund or the bonus, up to capacity.
func (b *SplitLockBucket) Success(k budget.Kind) {
	credit := b.bonus
	switch k {
	case budget.Transient:
		credit = b.transient
	case budget.Throttled:
		credit = b.throttled
	}
	b.mu.Lock()
	b.milli.Store(min(b.milli.Load()+credit, b.capacity))
	b.mu.Unlock()
}

// Available returns the balance in tokens.
func (b *SplitLockBucket) Available() float64 { return float64(b.milli.Load()) / 1000 }

// StaleCASThrottle is gRPC retry throttling whose compare-and-swap loop
// computes the new count once and, when the swap fails, reloads the old
// value but not the new one (concurrency: a CAS loop that retries with a
// stale result, so a concurrent charge or credit is overwritten).
type StaleCASThrottle struct {
	max, ratio int64 // milli-tokens
	milli      atomic.Int64
}

// NewStaleCASThrottle returns a full throttle (milli-tokens).
func NewStaleCASThrottle(max, ratio int64) *StaleCASThrottle {
	t := &StaleCASThrottle{max: max, ratio: ratio}
	t.milli.Store(max)
	return t
}

// Request does nothing.
func (t *StaleCASThrottle) Request() {}

// Retry takes a token and grants while more than half of max is left.
func (t *StaleCASThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	old := t.milli.Load()
	n := max(old-1000, 0)
	preempt()
	for !t.milli.CompareAndSwap(old, n) {
		old = t.milli.Load()
	}
	return 2*n > t.max
}

// Success adds ratio, up to max.
func (t *StaleCASThrottle) Success(budget.Kind) {
	old := t.milli.Load()
	n := min(old+t.ratio, t.max)
	preempt()
	for !t.milli.CompareAndSwap(old, n) {
		old = t.milli.Load()
	}
}

// Available returns the count in tokens.
func (t *StaleCASThrottle) Available() float64 { return float64(t.milli.Load()) / 1000 }

// UnlockedReadRatio is a sliding-window ratio budget with running totals
// that slides the window under its mutex but checks the totals after
// releasing it (concurrency: a read of state outside the lock, so two
// retries both see room for one and both are counted).
type UnlockedReadRatio struct {
	ppm, floor, width int64
	clock             budget.Clock

	mu            sync.Mutex
	seen, head    int64
	reqs, retries []int64 // by slot number mod Slots
	totR, totT    int64
}

// NewUnlockedReadRatio returns an empty budget of ppm parts per million.
func NewUnlockedReadRatio(ppm int64, window time.Duration, slots, floor int64, clock budget.Clock) *UnlockedReadRatio {
	w := int64(window) / slots
	now := int64(clock.Now())
	return &UnlockedReadRatio{ppm: ppm, floor: floor, width: w, clock: clock, seen: now, head: floorDiv(now, w),
		reqs: make([]int64, slots), retries: make([]int64, slots)}
}

// slide moves the window to the clock's reading. r.mu is held.
func (r *UnlockedReadRatio) slide() int {
	n := int64(len(r.reqs))
	if now := int64(r.clock.Now()); now > r.seen {
		r.seen = now
		h := floorDiv(now, r.width)
		if uint64(h)-uint64(r.head) >= uint64(n) {
			clear(r.reqs)
			clear(r.retries)
			r.totR, r.totT, r.head = 0, 0, h
		}
		for r.head != h {
			r.head++
			i := floorMod(r.head, n)
			r.totR, r.totT = r.totR-r.reqs[i], r.totT-r.retries[i]
			r.reqs[i], r.retries[i] = 0, 0
		}
	}
	return int(floorMod(r.head, n))
}

// Request counts a request.
func (r *UnlockedReadRatio) Request() {
	r.mu.Lock()
	r.reqs[r.slide()]++
	r.totR++
	r.mu.Unlock()
}

// Retry grants and counts a retry if the window allows it.
func (r *UnlockedReadRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.mu.Lock()
	r.slide()
	r.mu.Unlock()
	if !allows(r.totR, r.totT, r.ppm, r.floor) {
		return false
	}
	preempt()
	r.mu.Lock()
	r.retries[r.slide()]++
	r.totT++
	r.mu.Unlock()
	return true
}

// Success does nothing.
func (r *UnlockedReadRatio) Success(budget.Kind) {}

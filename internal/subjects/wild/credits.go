package wild

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// LostRefundBucket is a lock-free token bucket whose Success tries its
// compare-and-swap once (lost credits: a refund that meets a concurrent call
// is dropped, on the theory that contention is rare).
type LostRefundBucket struct {
	capacity, transient, throttled, bonus int64
	milli                                 atomic.Int64
}

// NewLostRefundBucket returns a full bucket (milli-tokens).
func NewLostRefundBucket(capacity, transient, throttled, bonus int64) *LostRefundBucket {
	b := &LostRefundBucket{capacity: capacity, transient: transient, throttled: throttled, bonus: bonus}
	b.milli.Store(capacity)
	return b
}

// Request does nothing.
func (b *LostRefundBucket) Request() {}

// Retry withdraws the cost of k if the balance covers it.
func (b *LostRefundBucket) Retry(k budget.Kind) bool {
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

// Success credits the refund or the bonus, up to capacity, best effort.
func (b *LostRefundBucket) Success(k budget.Kind) {
	credit := b.bonus
	switch k {
	case budget.Transient:
		credit = b.transient
	case budget.Throttled:
		credit = b.throttled
	}
	old := b.milli.Load()
	preempt()
	b.milli.CompareAndSwap(old, min(old+credit, b.capacity)) // lost on contention: fine, it is only a bonus
}

// Available returns the balance in tokens.
func (b *LostRefundBucket) Available() float64 { return float64(b.milli.Load()) / 1000 }

// DropBonusAtCapBucket is a token bucket that credits a success only if the
// whole credit fits (lost credits: a refund that would overflow the capacity
// is dropped instead of clamped, so 15 + 14 with capacity 20 stays at 15).
type DropBonusAtCapBucket struct {
	capacity, transient, throttled, bonus int64

	mu    sync.Mutex
	milli int64
}

// NewDropBonusAtCapBucket returns a full bucket (milli-tokens).
func NewDropBonusAtCapBucket(capacity, transient, throttled, bonus int64) *DropBonusAtCapBucket {
	return &DropBonusAtCapBucket{capacity: capacity, transient: transient, throttled: throttled, bonus: bonus, milli: capacity}
}

// Request does nothing.
func (b *DropBonusAtCapBucket) Request() {}

// Retry withdraws the cost of k if the balance covers it.
func (b *DropBonusAtCapBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	cost := b.transient
	if k == budget.Throttled {
		cost = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.milli < cost {
		return false
	}
	b.milli -= cost
	return true
}

// Success credits the refund or the bonus if it fits under capacity.
func (b *DropBonusAtCapBucket) Success(k budget.Kind) {
	credit := b.bonus
	switch k {
	case budget.Transient:
		credit = b.transient
	case budget.Throttled:
		credit = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.milli+credit <= b.capacity {
		b.milli += credit
	}
}

// Available returns the balance in tokens.
func (b *DropBonusAtCapBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.milli) / 1000
}

// ChargeOnDenyBucket is a token bucket that withdraws the cost first and
// denies when the balance went below zero, flooring it at zero (lost
// credits: a denied retry still empties what was left).
type ChargeOnDenyBucket struct {
	capacity, transient, throttled, bonus int64

	mu    sync.Mutex
	milli int64
}

// NewChargeOnDenyBucket returns a full bucket (milli-tokens).
func NewChargeOnDenyBucket(capacity, transient, throttled, bonus int64) *ChargeOnDenyBucket {
	return &ChargeOnDenyBucket{capacity: capacity, transient: transient, throttled: throttled, bonus: bonus, milli: capacity}
}

// Request does nothing.
func (b *ChargeOnDenyBucket) Request() {}

// Retry withdraws the cost of k and grants if the balance stayed >= 0.
func (b *ChargeOnDenyBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	cost := b.transient
	if k == budget.Throttled {
		cost = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.milli -= cost
	if b.milli < 0 {
		b.milli = 0
		return false
	}
	return true
}

// Success credits the refund or the bonus, up to capacity.
func (b *ChargeOnDenyBucket) Success(k budget.Kind) {
	credit := b.bonus
	switch k {
	case budget.Transient:
		credit = b.transient
	case budget.Throttled:
		credit = b.throttled
	}
	b.mu.Lock()
	b.milli = min(b.milli+credit, b.capacity)
	b.mu.Unlock()
}

// Available returns the balance in tokens.
func (b *ChargeOnDenyBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.milli) / 1000
}

// AtHalfThrottle is gRPC retry throttling that grants while the count is at
// least half of the maximum (lost credits inverted: the threshold is >=
// where gRFC A6 says strictly greater, so it grants one retry too many).
type AtHalfThrottle struct {
	max, ratio int64 // milli-tokens
	milli      atomic.Int64
}

// NewAtHalfThrottle returns a full throttle (milli-tokens).
func NewAtHalfThrottle(max, ratio int64) *AtHalfThrottle {
	t := &AtHalfThrottle{max: max, ratio: ratio}
	t.milli.Store(max)
	return t
}

// Request does nothing.
func (t *AtHalfThrottle) Request() {}

// Retry takes a token and grants while at least half of max is left.
func (t *AtHalfThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	for {
		old := t.milli.Load()
		n := max(old-1000, 0)
		if t.milli.CompareAndSwap(old, n) {
			return 2*n >= t.max
		}
	}
}

// Success adds ratio, up to max.
func (t *AtHalfThrottle) Success(budget.Kind) {
	for {
		old := t.milli.Load()
		if t.milli.CompareAndSwap(old, min(old+t.ratio, t.max)) {
			return
		}
	}
}

// Available returns the count in tokens.
func (t *AtHalfThrottle) Available() float64 { return float64(t.milli.Load()) / 1000 }

// AddThenUndoBucket is a lock-free token bucket whose Retry subtracts first
// and adds the cost back when the balance went negative (lost credits under
// contention: the brief dip makes a concurrent retry fail, and a concurrent
// refund clamped against it pushes the balance over capacity).
type AddThenUndoBucket struct {
	capacity, transient, throttled, bonus int64
	milli                                 atomic.Int64
}

// NewAddThenUndoBucket returns a full bucket (milli-tokens).
func NewAddThenUndoBucket(capacity, transient, throttled, bonus int64) *AddThenUndoBucket {
	b := &AddThenUndoBucket{capacity: capacity, transient: transient, throttled: throttled, bonus: bonus}
	b.milli.Store(capacity)
	return b
}

// Request does nothing.
func (b *AddThenUndoBucket) Request() {}

// Retry withdraws the cost of k, and puts it back if that overdrew.
func (b *AddThenUndoBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	cost := b.transient
	if k == budget.Throttled {
		cost = b.throttled
	}
	if b.milli.Add(-cost) >= 0 {
		return true
	}
	preempt()
	b.milli.Add(cost)
	return false
}

// Success credits the refund or the bonus, up to capacity.
func (b *AddThenUndoBucket) Success(k budget.Kind) {
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
func (b *AddThenUndoBucket) Available() float64 { return float64(b.milli.Load()) / 1000 }

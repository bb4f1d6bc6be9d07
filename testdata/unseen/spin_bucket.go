package unseen

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// SpinBucket is a correct token bucket with a time-based refill
// (model.TokenBucket with RefillPerSecond > 0) guarded by a spin lock: an
// atomic.Int32 flag taken by compare-and-swap, waited for with
// runtime.Gosched in a loop so that a holder preempted on the same core can
// finish, and released by an atomic store. Everything a call reads or
// writes, the clock reading included, is inside the lock, so every call is
// one critical section. The balance is in fine units of 1e-9 milli-token.
type SpinBucket struct {
	m     model.TokenBucket
	capU  int64
	clock budget.Clock

	lock  atomic.Int32 // 1 while held
	units int64        // guarded by lock
	last  time.Duration
}

// NewSpinBucket returns a full bucket following m, refilled by clock.
func NewSpinBucket(m model.TokenBucket, clock budget.Clock) *SpinBucket {
	return &SpinBucket{m: m, capU: m.Capacity * fine, clock: clock, units: m.Capacity * fine, last: clock.Now()}
}

func (b *SpinBucket) acquire() {
	for !b.lock.CompareAndSwap(0, 1) {
		runtime.Gosched()
	}
}

func (b *SpinBucket) release() { b.lock.Store(0) }

// refillLocked brings the balance up to the clock's reading.
func (b *SpinBucket) refillLocked() {
	b.units, b.last = refilled(b.units, b.capU, b.m.RefillPerSecond, b.last, b.clock.Now())
}

// Request does nothing: a first attempt is free.
func (b *SpinBucket) Request() {}

// Retry withdraws the cost of a retry of kind k when the refilled balance
// covers it.
func (b *SpinBucket) Retry(k budget.Kind) bool {
	c := cost(b.m, k) * fine
	if c == 0 {
		return false
	}
	b.acquire()
	defer b.release()
	b.refillLocked()
	if b.units < c {
		return false
	}
	b.units -= c
	return true
}

// Success deposits the credit of kind k, up to the capacity.
func (b *SpinBucket) Success(k budget.Kind) {
	cr := credit(b.m, k) * fine
	b.acquire()
	defer b.release()
	b.refillLocked()
	b.units = min(b.units+cr, b.capU)
}

// Available returns the balance in tokens, with the refill due by now.
func (b *SpinBucket) Available() float64 {
	b.acquire()
	defer b.release()
	u, _ := refilled(b.units, b.capU, b.m.RefillPerSecond, b.last, b.clock.Now())
	return tokensOf(u)
}

package zoo

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// snap is an immutable state of a SnapBucket.
type snap struct {
	nano int64 // balance in units of 1e-9 milli-token: whole milli-tokens and the carried fraction in one number
	seen int64 // latest clock reading seen, ns
}

// SnapBucket is a lock-free token bucket with refill. Its state is an
// immutable snapshot behind an atomic.Pointer; every change builds a new
// snapshot from the one loaded and installs it with compare-and-swap, and
// starts over if another call got there first. The clock is read after the
// snapshot is loaded, so the call takes effect at the instant of the
// reading, at which the loaded snapshot was still current.
//
// Capacity × 1e9 must fit in an int64.
type SnapBucket struct {
	p      bucketParams
	perSec int64
	full   int64 // capacity in units of 1e-9 milli-token
	clock  budget.Clock
	state  atomic.Pointer[snap]
}

// NewSnapBucket returns a full bucket for m, which must have RefillPerSecond > 0
// and NoRefund false.
func NewSnapBucket(m model.TokenBucket, clock budget.Clock) *SnapBucket {
	b := &SnapBucket{
		p:      bucketParams{m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus},
		perSec: m.RefillPerSecond, full: m.Capacity * nanosPerSec, clock: clock,
	}
	b.state.Store(&snap{nano: b.full, seen: int64(clock.Now())})
	return b
}

// advance returns s as seen at clock reading now.
func (b *SnapBucket) advance(s snap, now int64) snap {
	if now <= s.seen {
		return s
	}
	elapsed := uint64(now) - uint64(s.seen)
	s.seen = now
	gap := b.full - s.nano
	if elapsed >= uint64((gap+b.perSec-1)/b.perSec) {
		s.nano = b.full
	} else {
		s.nano += int64(elapsed) * b.perSec
	}
	return s
}

// update applies f to the current state at the current clock reading,
// atomically, and returns f's answer.
func (b *SnapBucket) update(f func(snap) (snap, bool)) bool {
	for {
		old := b.state.Load()
		s := b.advance(*old, int64(b.clock.Now()))
		s, ok := f(s)
		if b.state.CompareAndSwap(old, &s) {
			return ok
		}
	}
}

func (b *SnapBucket) Request() {}

func (b *SnapBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	c := b.p.cost(k) * nanosPerSec
	return b.update(func(s snap) (snap, bool) {
		// Covered iff whole milli-tokens >= cost; the fraction does not count.
		if s.nano/nanosPerSec*nanosPerSec < c {
			return s, false
		}
		s.nano -= c
		return s, true
	})
}

func (b *SnapBucket) Success(k budget.Kind) {
	c := b.p.credit(k) * nanosPerSec
	b.update(func(s snap) (snap, bool) {
		s.nano += c
		if s.nano >= b.full { // whole milli-tokens reached capacity: drop the fraction
			s.nano = b.full
		}
		return s, false
	})
}

// Available returns the balance in tokens as of the current clock reading,
// changing nothing.
func (b *SnapBucket) Available() float64 {
	for {
		old := b.state.Load()
		now := int64(b.clock.Now())
		if b.state.Load() != old {
			continue // changed under the reading: try again
		}
		s := b.advance(*old, now)
		return float64(s.nano/nanosPerSec) / 1000
	}
}

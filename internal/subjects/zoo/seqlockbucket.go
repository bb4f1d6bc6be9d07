package zoo

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// SeqlockBucket is a token bucket with time-based refill whose state lives
// in atomic fields. Every change is made under a sync.Mutex; Available reads
// the fields without the mutex, as a seqlock reader: a sequence counter that
// is odd while a change is being written, and unchanged across the reads,
// proves the fields read belong to one state.
//
// The balance is whole milli-tokens plus a fraction in units of 1e-9
// milli-token, so refill is exact however time is cut up. Capacity × 1e9
// must fit in an int64.
type SeqlockBucket struct {
	p      bucketParams
	perSec int64 // milli-tokens per second, > 0
	clock  budget.Clock

	mu    sync.Mutex    // serializes changes
	seq   atomic.Uint64 // odd while a change is being stored
	milli atomic.Int64
	frac  atomic.Int64 // in [0, 1e9); 0 whenever milli == capacity
	seen  atomic.Int64 // latest clock reading seen, ns
}

// NewSeqlockBucket returns a full bucket that refills perSec milli-tokens a
// second from the clock's current reading.
func NewSeqlockBucket(capacity, transient, throttled, bonus, perSec int64, clock budget.Clock) *SeqlockBucket {
	b := &SeqlockBucket{p: bucketParams{capacity, transient, throttled, bonus}, perSec: perSec, clock: clock}
	b.milli.Store(capacity)
	b.seen.Store(int64(clock.Now()))
	return b
}

// refilled returns the state (milli, frac, seen) brought up to clock reading now.
func (b *SeqlockBucket) refilled(milli, frac, seen, now int64) (int64, int64, int64) {
	if now <= seen {
		return milli, frac, seen
	}
	elapsed := uint64(now) - uint64(seen) // the true distance even if now-seen overflows
	missing := (b.p.capacity-milli)*nanosPerSec - frac
	if missing <= 0 || elapsed >= uint64((missing+b.perSec-1)/b.perSec) {
		return b.p.capacity, 0, now
	}
	acc := frac + int64(elapsed)*b.perSec // < missing + frac, no overflow
	return milli + acc/nanosPerSec, acc % nanosPerSec, now
}

// change refills to the clock's reading, applies f to the balance and stores
// the result, all under b.mu, and returns f's answer.
func (b *SeqlockBucket) change(f func(milli int64) (int64, bool)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, fr, s := b.refilled(b.milli.Load(), b.frac.Load(), b.seen.Load(), int64(b.clock.Now()))
	m, ok := f(m)
	if m >= b.p.capacity {
		m, fr = b.p.capacity, 0
	}
	b.seq.Add(1) // odd: readers retry
	b.milli.Store(m)
	b.frac.Store(fr)
	b.seen.Store(s)
	b.seq.Add(1)
	return ok
}

// Request does nothing: a first attempt is free.
func (b *SeqlockBucket) Request() {}

// Retry withdraws the cost of a retry of kind k if the balance covers it.
func (b *SeqlockBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	c := b.p.cost(k)
	return b.change(func(m int64) (int64, bool) {
		if m < c {
			return m, false
		}
		return m - c, true
	})
}

// Success deposits the refund of a retry of kind k, or the bonus, up to capacity.
func (b *SeqlockBucket) Success(k budget.Kind) {
	c := b.p.credit(k)
	b.change(func(m int64) (int64, bool) { return m + c, false })
}

// Available returns the balance in tokens as of the clock's current
// reading, without the mutex and without changing anything.
func (b *SeqlockBucket) Available() float64 {
	for {
		s := b.seq.Load()
		if s&1 != 0 {
			runtime.Gosched() // a change is being stored
			continue
		}
		m, fr, seen := b.milli.Load(), b.frac.Load(), b.seen.Load()
		now := int64(b.clock.Now())
		if b.seq.Load() != s {
			continue // a change was stored under the reads: try again
		}
		m, _, _ = b.refilled(m, fr, seen, now)
		return float64(m) / 1000
	}
}

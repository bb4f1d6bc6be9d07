package zoo

import (
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

const nanosPerSec = int64(time.Second)

// RefillBucket is a token bucket with time-based refill, guarded by a
// sync.Mutex. The balance is kept as whole milli-tokens plus a fraction of a
// milli-token in units of 1e-9, so that refill is exact however time is cut
// up. The clock given at construction is read on every Retry (of a retry
// kind) and every Success; a reading earlier than the latest one seen counts
// as the latest one seen.
//
// Capacity × 1e9 must fit in an int64.
type RefillBucket struct {
	p      bucketParams
	perSec int64 // milli-tokens per second, > 0
	clock  budget.Clock

	mu    sync.Mutex
	milli int64
	frac  int64 // in [0, 1e9); 0 whenever milli == capacity
	seen  int64 // latest clock reading seen, ns
}

// NewRefillBucket returns a full bucket that starts refilling from the
// clock's current reading.
func NewRefillBucket(capacity, transient, throttled, bonus, perSec int64, clock budget.Clock) *RefillBucket {
	return &RefillBucket{
		p: bucketParams{capacity, transient, throttled, bonus}, perSec: perSec, clock: clock,
		milli: capacity, seen: int64(clock.Now()),
	}
}

// refilled returns the balance after elapsed ns have passed from (milli, frac).
func (b *RefillBucket) refilled(milli, frac int64, elapsed uint64) (int64, int64) {
	// What is still missing to be full, in units of 1e-9 milli-tokens.
	missing := (b.p.capacity-milli)*nanosPerSec - frac
	if missing <= 0 {
		return b.p.capacity, 0
	}
	// Full as soon as elapsed*perSec >= missing, i.e. elapsed >= ceil(missing/perSec).
	if elapsed >= uint64((missing+b.perSec-1)/b.perSec) {
		return b.p.capacity, 0
	}
	earned := int64(elapsed)*b.perSec + frac // < missing+frac <= (capacity-milli)*1e9
	return milli + earned/nanosPerSec, earned % nanosPerSec
}

// observe reads the clock and brings the balance up to date. b.mu is held.
func (b *RefillBucket) observe() {
	now := int64(b.clock.Now())
	var elapsed uint64
	if now > b.seen {
		elapsed = uint64(now) - uint64(b.seen) // true distance even if now-seen overflows
		b.seen = now
	}
	b.milli, b.frac = b.refilled(b.milli, b.frac, elapsed)
}

func (b *RefillBucket) Request() {}

func (b *RefillBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	c := b.p.cost(k)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.observe()
	if b.milli < c {
		return false
	}
	b.milli -= c
	return true
}

func (b *RefillBucket) Success(k budget.Kind) {
	c := b.p.credit(k)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.observe()
	b.milli += c
	if b.milli >= b.p.capacity {
		b.milli, b.frac = b.p.capacity, 0
	}
}

// Available returns the balance in tokens as of the clock's current reading,
// without changing the state.
func (b *RefillBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := int64(b.clock.Now())
	var elapsed uint64
	if now > b.seen {
		elapsed = uint64(now) - uint64(b.seen)
	}
	m, _ := b.refilled(b.milli, b.frac, elapsed)
	return float64(m) / 1000
}

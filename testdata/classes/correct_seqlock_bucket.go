package classes

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// SeqlockBucket is UncheckedSeqlockBucket with a correct seqlock: a token
// bucket that refills with time, whose writers hold a mutex and publish the
// balance and the latest clock reading seen under a sequence counter (odd
// while they write), and whose Retry denies without the lock when no time
// has passed since the latest reading and the balance cannot pay. Correct:
// the reader takes the snapshot only when the counter is even before and
// unchanged after its loads, so the snapshot is one the bucket held during
// the call; anything else goes to the locked path.
type SeqlockBucket struct {
	capU  int64
	costU [3]int64
	bonus [3]int64
	rate  int64
	clock budget.Clock

	mu   sync.Mutex
	seq  atomic.Uint64
	u    atomic.Int64
	last atomic.Int64
}

// NewSeqlockBucket returns a full bucket with m's parameters reading clock.
func NewSeqlockBucket(m model.TokenBucket, clock budget.Clock) *SeqlockBucket {
	b := &SeqlockBucket{capU: m.Capacity * fine, rate: m.RefillPerSecond, clock: clock}
	for _, k := range []budget.Kind{budget.FirstAttempt, budget.Transient, budget.Throttled} {
		b.costU[k] = cost(m, k) * fine
		b.bonus[k] = credit(m, k) * fine
	}
	b.u.Store(b.capU)
	b.last.Store(int64(clock.Now()))
	return b
}

// Request does nothing.
func (b *SeqlockBucket) Request() {}

// Retry withdraws the cost of a retry when the balance, refilled to now,
// covers it.
func (b *SeqlockBucket) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	c := b.costU[kind]
	now := b.clock.Now()
	if v1 := b.seq.Load(); v1&1 == 0 {
		u := b.u.Load()
		last := time.Duration(b.last.Load())
		if b.seq.Load() == v1 && now <= last && u < c {
			return false
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq.Add(1)
	defer b.seq.Add(1)
	u, last := refill(b.u.Load(), b.capU, b.rate, time.Duration(b.last.Load()), b.clock.Now())
	granted := u >= c
	if granted {
		u -= c
	}
	b.u.Store(u)
	b.last.Store(int64(last))
	return granted
}

// Success refunds a retry's cost, or deposits the bonus, up to capacity.
func (b *SeqlockBucket) Success(kind budget.Kind) {
	if kind > budget.Throttled {
		kind = budget.FirstAttempt
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq.Add(1)
	defer b.seq.Add(1)
	u, last := refill(b.u.Load(), b.capU, b.rate, time.Duration(b.last.Load()), b.clock.Now())
	b.u.Store(min(u+b.bonus[kind], b.capU))
	b.last.Store(int64(last))
}

// Available returns the balance refilled to now, in whole milli-tokens.
func (b *SeqlockBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, _ := refill(b.u.Load(), b.capU, b.rate, time.Duration(b.last.Load()), b.clock.Now())
	return tokensOf(u)
}

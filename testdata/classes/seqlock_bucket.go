package classes

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// UncheckedSeqlockBucket is a token bucket that refills with time. Writers
// (every grant and every success) hold a mutex and publish the balance and
// the latest clock reading seen in atomics under a sequence counter, odd
// while a write is in progress. Retry first tries a lock-free deny for
// outages: when no time has passed since the latest reading seen (so
// nothing was earned) and the published balance cannot pay the retry, it
// denies without the lock.
//
// Class 3, token bucket family (a bucket of 50 tokens, the AWS costs, 1
// token a success, 2 tokens a second:
// model.TokenBucket{Capacity: 50_000, TransientCost: 14_000,
// ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 2_000}).
//
// Bug: the reader checks the sequence counter only before it reads, never
// after, so a write that runs between its two loads goes unseen and it
// decides on a torn snapshot: the balance from before the write with the
// clock reading from after it. With 3 tokens at instant 0 and the clock at
// 1 s (2 tokens earned, 5 due):
//
//	g1: Retry(throttled): sequence even; loads the balance: 3 tokens (as of 0 s)
//	g2: Success(first): lock, sequence odd, refill 3 → 5, +1 → 6 tokens, last = 1 s, sequence even, unlock
//	g1: loads last = 1 s: no time passed since (it thinks), 3 tokens < 5 → denied
//
// In every order the retry finds at least 5 tokens and the model grants it
// (an under-grant). The wrong answer needs g1 preempted between its two
// loads (testHook point "seqlock.bucket.read").
type UncheckedSeqlockBucket struct {
	capU  int64    // capacity, fine units
	costU [3]int64 // by kind, fine units
	bonus [3]int64 // by kind, fine units: a refund, or the bonus
	rate  int64    // milli-tokens a second
	clock budget.Clock

	mu   sync.Mutex // serializes writers
	seq  atomic.Uint64
	u    atomic.Int64 // balance as of last, fine units
	last atomic.Int64 // the latest clock reading seen
}

// NewUncheckedSeqlockBucket returns a full bucket with m's parameters
// reading clock.
func NewUncheckedSeqlockBucket(m model.TokenBucket, clock budget.Clock) *UncheckedSeqlockBucket {
	b := &UncheckedSeqlockBucket{capU: m.Capacity * fine, rate: m.RefillPerSecond, clock: clock}
	for _, k := range []budget.Kind{budget.FirstAttempt, budget.Transient, budget.Throttled} {
		b.costU[k] = cost(m, k) * fine
		b.bonus[k] = credit(m, k) * fine
	}
	b.u.Store(b.capU)
	b.last.Store(int64(clock.Now()))
	return b
}

// Request does nothing.
func (b *UncheckedSeqlockBucket) Request() {}

// Retry withdraws the cost of a retry when the balance, refilled to now,
// covers it.
func (b *UncheckedSeqlockBucket) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	c := b.costU[kind]
	now := b.clock.Now()
	if b.seq.Load()&1 == 0 {
		u := b.u.Load()
		hook("seqlock.bucket.read")
		last := time.Duration(b.last.Load())
		// The sequence counter is not read again here.
		if now <= last && u < c {
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
func (b *UncheckedSeqlockBucket) Success(kind budget.Kind) {
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
func (b *UncheckedSeqlockBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, _ := refill(b.u.Load(), b.capU, b.rate, time.Duration(b.last.Load()), b.clock.Now())
	return tokensOf(u)
}

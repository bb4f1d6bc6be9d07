package unseen

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// StaleCASBucket is an AWS-style retry quota (model.AWS()) kept in one
// atomic int64 of milli-tokens, every change a compare-and-swap. Retry is a
// correct load-check-CAS loop. Success computes the clamped new balance
// once, before its loop, and on a failed compare-and-swap reloads only the
// expected value.
//
// The bug: a CAS loop that retries with a stale value. When Success's CAS
// fails, the loop reloads old but keeps n, computed from the first load, so
// the retry succeeds and writes a balance derived from a state that no
// longer exists. With 100 tokens:
//
//  1. goroutine A, in Success(FirstAttempt), loads 100 and computes
//     n = 101 (hook "stalecas.success");
//  2. goroutine B runs all of Retry(Transient): 100 covers 14, the CAS
//     100 -> 86 succeeds, and it returns true;
//  3. A's CAS(100, 101) fails; it reloads old = 86 and CAS(86, 101)
//     succeeds.
//
// Wrong outcome: lost withdrawal (wrong balance). The bucket holds 101
// tokens where every order of the two calls leaves 87: B's retry was
// granted and charged, then the charge was undone, so the bucket later
// over-grants by one transient retry. Sequentially the first CAS always
// succeeds, so the bug needs two goroutines.
type StaleCASBucket struct {
	m      model.TokenBucket
	tokens atomic.Int64 // milli-tokens
}

// NewStaleCASBucket returns a full bucket following m, which must have no
// refill.
func NewStaleCASBucket(m model.TokenBucket) *StaleCASBucket {
	b := &StaleCASBucket{m: m}
	b.tokens.Store(m.Capacity)
	return b
}

// Request does nothing: a first attempt is free.
func (b *StaleCASBucket) Request() {}

// Retry withdraws the cost of a retry of kind k when the balance covers it.
func (b *StaleCASBucket) Retry(k budget.Kind) bool {
	c := cost(b.m, k)
	if c == 0 {
		return false
	}
	for {
		t := b.tokens.Load()
		if t < c {
			return false
		}
		if b.tokens.CompareAndSwap(t, t-c) {
			return true
		}
	}
}

// Success deposits the credit of kind k, up to the capacity.
func (b *StaleCASBucket) Success(k budget.Kind) {
	old := b.tokens.Load()
	n := min(old+credit(b.m, k), b.m.Capacity)
	if n == old {
		return
	}
	hook("stalecas.success")
	for !b.tokens.CompareAndSwap(old, n) {
		old = b.tokens.Load() // n is not recomputed
	}
}

// Available returns the balance in tokens.
func (b *StaleCASBucket) Available() float64 { return float64(b.tokens.Load()) / milli }

package unseen

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// LoadAddBucket is an AWS-style retry quota (model.AWS(): a token bucket
// without refill) kept in one atomic int64 of milli-tokens. Success is a
// correct compare-and-swap loop that clamps at the capacity; Retry, to stay
// cheap, checks the balance with one atomic Load and then withdraws with
// one atomic Add.
//
// The bug: a check-then-act across two atomic operations. Retry's Load and
// its Add are each atomic, but nothing holds the balance between them.
// With 14 tokens left (one transient retry's worth):
//
//  1. goroutine A, in Retry(Transient), loads 14 tokens and passes the
//     check (the line before hook "loadadd.retry");
//  2. goroutine B runs all of Retry(Transient): loads 14, passes, adds -14,
//     and returns true; the balance is 0;
//  3. A adds -14 and returns true; the balance is -14.
//
// Wrong outcome: over-grant. Two retries are granted where every order of
// the two calls grants one, and the balance goes negative, so later
// successes refill a bucket that was overspent. The race detector sees
// nothing: every access is atomic.
type LoadAddBucket struct {
	m      model.TokenBucket
	tokens atomic.Int64 // milli-tokens
}

// NewLoadAddBucket returns a full bucket following m, which must have no
// refill.
func NewLoadAddBucket(m model.TokenBucket) *LoadAddBucket {
	b := &LoadAddBucket{m: m}
	b.tokens.Store(m.Capacity)
	return b
}

// Request does nothing: a first attempt is free.
func (b *LoadAddBucket) Request() {}

// Retry withdraws the cost of a retry of kind k when the balance covers it.
func (b *LoadAddBucket) Retry(k budget.Kind) bool {
	c := cost(b.m, k)
	if c == 0 {
		return false
	}
	if b.tokens.Load() < c {
		return false
	}
	hook("loadadd.retry")
	b.tokens.Add(-c)
	return true
}

// Success deposits the credit of kind k, up to the capacity.
func (b *LoadAddBucket) Success(k budget.Kind) {
	cr := credit(b.m, k)
	for {
		t := b.tokens.Load()
		n := min(t+cr, b.m.Capacity)
		if n == t || b.tokens.CompareAndSwap(t, n) {
			return
		}
	}
}

// Available returns the balance in tokens.
func (b *LoadAddBucket) Available() float64 { return float64(b.tokens.Load()) / milli }

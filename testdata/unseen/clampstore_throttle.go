package unseen

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// ClampStoreThrottle is gRPC's retry throttling (gRFC A6, model.Throttle:
// 10 tokens, 0.1 a success) kept in one atomic int64 of milli-tokens.
// Retry is a correct compare-and-swap loop that takes a token down to zero
// and answers from what is left. Success adds its ratio with one atomic
// Add and, when that overshoots the maximum, stores the maximum.
//
// The bug: a clamp that Stores over a concurrent withdrawal. Between the
// Add that overshoots and the Store of the maximum, another goroutine's
// withdrawal lands on the overshot value, and the Store wipes it out. With
// a full count of 10 tokens:
//
//  1. goroutine A, in Success, adds 0.1: 10.1 tokens, over the maximum
//     (hook "clampstore.over", before the Store);
//  2. goroutine B runs all of Retry(Transient): takes a token from 10.1,
//     9.1 > 5, and returns true;
//  3. A stores 10.
//
// Wrong outcome: lost withdrawal (wrong balance, over-grant later). The
// count is 10 where every order leaves 9 or 9.1: B's retry was granted but
// never charged, so the throttle grants one retry more before it trips.
type ClampStoreThrottle struct {
	m      model.Throttle
	tokens atomic.Int64 // milli-tokens
}

// NewClampStoreThrottle returns a full throttle following m.
func NewClampStoreThrottle(m model.Throttle) *ClampStoreThrottle {
	t := &ClampStoreThrottle{m: m}
	t.tokens.Store(m.Max)
	return t
}

// Request does nothing.
func (t *ClampStoreThrottle) Request() {}

// Retry takes a token for a retryable failure and reports whether more than
// half of the maximum is left.
func (t *ClampStoreThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	for {
		old := t.tokens.Load()
		n := max(old-milli, 0)
		if n == old || t.tokens.CompareAndSwap(old, n) {
			return 2*n > t.m.Max
		}
	}
}

// Success adds the ratio, up to the maximum.
func (t *ClampStoreThrottle) Success(budget.Kind) {
	if t.tokens.Add(t.m.Ratio) > t.m.Max {
		hook("clampstore.over")
		t.tokens.Store(t.m.Max)
	}
}

// Available returns the token count.
func (t *ClampStoreThrottle) Available() float64 {
	return float64(min(t.tokens.Load(), t.m.Max)) / milli
}

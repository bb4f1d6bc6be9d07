package unseen

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// LazyThrottle is gRPC's retry throttling (gRFC A6, model.Throttle) for a
// service with thousands of destinations, most of them idle: it allocates
// its token counter on first use, so that a throttle that is never used
// costs one pointer. Once allocated, the counter is one atomic int64 of
// milli-tokens changed only by compare-and-swap loops.
//
// The bug: lazily-initialised state without synchronization. The counter
// pointer is a plain field, read and set without a lock, a sync.Once or an
// atomic. Two first calls can each find it nil, each allocate a full
// counter, and each publish theirs; the call whose counter is overwritten
// has charged a counter nobody will read again. On a new throttle:
//
//  1. goroutine A, in Retry(Transient), finds no counter, allocates one
//     holding 10 tokens (hook "lazy.alloc", before publishing it);
//  2. goroutine B runs all of Retry(Transient): finds no counter either,
//     allocates and publishes its own, takes a token (9), returns true;
//  3. A publishes its counter, over B's, takes a token (9), returns true.
//
// Wrong outcome: lost withdrawal (wrong balance, over-grant later). The
// count is 9 where every order leaves 8; B's token is gone, and the
// throttle grants one more retry before it trips. Under -race it is also a
// data race on the pointer.
type LazyThrottle struct {
	m      model.Throttle
	tokens *atomic.Int64 // allocated on first use
}

// NewLazyThrottle returns a throttle following m that allocates its
// counter on first use.
func NewLazyThrottle(m model.Throttle) *LazyThrottle { return &LazyThrottle{m: m} }

// counter returns the token counter, allocating a full one on first use.
func (t *LazyThrottle) counter() *atomic.Int64 {
	c := t.tokens
	if c == nil {
		c = new(atomic.Int64)
		c.Store(t.m.Max)
		hook("lazy.alloc")
		t.tokens = c
	}
	return c
}

// Request does nothing.
func (t *LazyThrottle) Request() {}

// Retry takes a token for a retryable failure and reports whether more than
// half of the maximum is left.
func (t *LazyThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	c := t.counter()
	for {
		old := c.Load()
		n := max(old-milli, 0)
		if n == old || c.CompareAndSwap(old, n) {
			return 2*n > t.m.Max
		}
	}
}

// Success adds the ratio, up to the maximum.
func (t *LazyThrottle) Success(budget.Kind) {
	c := t.counter()
	for {
		old := c.Load()
		n := min(old+t.m.Ratio, t.m.Max)
		if n == old || c.CompareAndSwap(old, n) {
			return
		}
	}
}

// Available returns the token count.
func (t *LazyThrottle) Available() float64 { return float64(t.counter().Load()) / milli }

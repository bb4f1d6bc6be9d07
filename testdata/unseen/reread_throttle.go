package unseen

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// RereadThrottle is gRPC's retry throttling (gRFC A6, model.Throttle)
// guarded by a mutex. Its count is an atomic int64, written only under the
// mutex, so that Available can read it without the lock for metrics. Retry
// takes the token under the lock and then answers through the same
// lock-free read Available uses: is the count above half the maximum?
//
// The bug: the answer is read again after the unlock, and so includes
// other goroutines' changes made after this call's own. With 6.5 tokens:
//
//  1. goroutine A, in Retry(Transient), under the lock takes a token
//     (5.5) and releases the lock (hook "reread.unlocked", before its
//     read);
//  2. goroutine B runs all of Retry(Transient): takes a token (4.5),
//     4.5 is not above 5, returns false;
//  3. A reads 4.5 and returns false.
//
// Wrong outcome: under-grant. Both retries are denied where every order of
// the two calls grants one (the first to take its token leaves 5.5, more
// than half of 10). With a Success in B's place instead, A can be granted
// on a count its own withdrawal never produced.
type RereadThrottle struct {
	m      model.Throttle
	mu     sync.Mutex
	tokens atomic.Int64 // milli-tokens; written under mu
}

// NewRereadThrottle returns a full throttle following m.
func NewRereadThrottle(m model.Throttle) *RereadThrottle {
	t := &RereadThrottle{m: m}
	t.tokens.Store(m.Max)
	return t
}

// Request does nothing.
func (t *RereadThrottle) Request() {}

// Retry takes a token for a retryable failure and reports whether more than
// half of the maximum is left.
func (t *RereadThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	t.mu.Lock()
	t.tokens.Store(max(t.tokens.Load()-milli, 0))
	t.mu.Unlock()
	hook("reread.unlocked")
	return t.aboveHalf()
}

// aboveHalf reports whether more than half of the maximum is left.
func (t *RereadThrottle) aboveHalf() bool { return 2*t.tokens.Load() > t.m.Max }

// Success adds the ratio, up to the maximum.
func (t *RereadThrottle) Success(budget.Kind) {
	t.mu.Lock()
	t.tokens.Store(min(t.tokens.Load()+t.m.Ratio, t.m.Max))
	t.mu.Unlock()
}

// Available returns the token count.
func (t *RereadThrottle) Available() float64 { return float64(t.tokens.Load()) / milli }

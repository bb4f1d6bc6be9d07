package designs

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// InvertedRWInFlight is an in-flight retry budget that uses a
// sync.RWMutex upside down: the frequent calls that only move one counter
// (Request, CallEnd, AttemptEnd) take the read lock, many at once, and
// change their counter with an atomic compare-and-swap loop; Retry, which
// must decide on both counters together, takes the write lock, under which
// no counter can move, reads both, and counts the retry.
//
// Linearizability: a call under the read lock changes one counter by one
// atomic compare-and-swap and is linearized there (or, when it changes
// nothing, at the load that found the counter at its bound); calls under
// the read lock commute with each other except through their counter,
// whose atomic order orders them. Retry holds the write lock, so no read
// lock is held while it runs: both counters are constant from its first
// load to its store, and it is linearized at any point in between. The
// write lock excludes the read lock, so no call's atomic step falls inside
// a Retry.
type InvertedRWInFlight struct {
	cfg InFlightConfig

	mu      sync.RWMutex
	calls   atomic.Int64
	retries atomic.Int64
}

var _ budget.InFlightBudget = (*InvertedRWInFlight)(nil)

// NewInvertedRWInFlight returns an InvertedRWInFlight with nothing in
// flight.
func NewInvertedRWInFlight(cfg InFlightConfig) *InvertedRWInFlight {
	return &InvertedRWInFlight{cfg: cfg}
}

// bump adds d to c, keeping it within [0, 2^32 - 1]: a change that would
// leave that range changes nothing.
func bump(c *atomic.Int64, d int64) {
	for {
		old := c.Load()
		n := old + d
		if n < 0 || n > maxInFlight || c.CompareAndSwap(old, n) {
			return
		}
	}
}

// Request counts a call in flight, unless 2^32 - 1 are.
func (b *InvertedRWInFlight) Request() {
	b.mu.RLock()
	bump(&b.calls, 1)
	b.mu.RUnlock()
}

// CallEnd ends a call in flight; it does nothing when none is.
func (b *InvertedRWInFlight) CallEnd() {
	b.mu.RLock()
	bump(&b.calls, -1)
	b.mu.RUnlock()
}

// AttemptEnd ends a retry in flight when k is a retry kind and one is in
// flight.
func (b *InvertedRWInFlight) AttemptEnd(k budget.Kind) {
	if !k.IsRetry() {
		return
	}
	b.mu.RLock()
	bump(&b.retries, -1)
	b.mu.RUnlock()
}

// Retry grants a retry of a retry kind while the rule admits one more
// retry in flight, and counts it in flight.
func (b *InvertedRWInFlight) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.retries.Load()
	if !b.cfg.admits(r, b.calls.Load()) {
		return false
	}
	b.retries.Store(r + 1)
	return true
}

// Success does nothing: the budget recovers as retries end.
func (b *InvertedRWInFlight) Success(budget.Kind) {}

// Available returns how many more retries would be granted now, with
// nothing else changing.
func (b *InvertedRWInFlight) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg.available(b.retries.Load(), b.calls.Load())
}

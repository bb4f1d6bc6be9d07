package unseen

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// OptimisticInFlight is an in-flight retry budget with Envoy's rule
// (model.EnvoyDefaults()) in two atomic counters. To avoid the classic
// check-then-act, Retry takes its slot first: it adds one to the retries in
// flight, checks the rule against the count before its own add, and gives
// the slot back if the rule says no. A granted retry is never counted
// twice, so the budget never over-grants.
//
// The bug: the in-flight count is raised before the limit check and
// lowered after it, so for that moment it holds a retry that will be
// denied, and another goroutine's check counts it. With no calls and 3
// retries in flight (at the limit of 3):
//
//  1. goroutine A, in Retry(Transient), adds one (4) (hook
//     "optimistic.taken", before its check);
//  2. goroutine C ends a retry: AttemptEnd(Transient), 3;
//  3. goroutine B runs all of Retry(Transient): adds one (4), the count
//     before its add is 3, not below 3, so it gives the slot back (3) and
//     returns false;
//  4. A checks the count before its add, 3, not below 3: gives the slot
//     back (2) and returns false.
//
// Wrong outcome: under-grant. After C's end only 2 retries are in flight,
// and B started after that end; every order of A and B grants exactly one
// of them, but the budget denied both.
type OptimisticInFlight struct {
	m              model.InFlight
	calls, retries atomic.Int64
}

// NewOptimisticInFlight returns a budget following m (with the Envoy rule)
// with nothing in flight.
func NewOptimisticInFlight(m model.InFlight) *OptimisticInFlight { return &OptimisticInFlight{m: m} }

// Request counts a call in flight.
func (b *OptimisticInFlight) Request() { incSat(&b.calls) }

// Retry grants a retry while the rule admits one more in flight.
func (b *OptimisticInFlight) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	n := b.retries.Add(1)
	hook("optimistic.taken")
	if n-1 < envoyLimit(b.m, b.calls.Load()) {
		return true
	}
	b.retries.Add(-1)
	return false
}

// Success does nothing.
func (b *OptimisticInFlight) Success(budget.Kind) {}

// AttemptEnd ends a retry in flight.
func (b *OptimisticInFlight) AttemptEnd(k budget.Kind) {
	if k.IsRetry() {
		decPos(&b.retries)
	}
}

// CallEnd ends a call in flight.
func (b *OptimisticInFlight) CallEnd() { decPos(&b.calls) }

// Available returns how many more retries the rule would grant now.
func (b *OptimisticInFlight) Available() float64 {
	return float64(max(envoyLimit(b.m, b.calls.Load())-b.retries.Load(), 0))
}

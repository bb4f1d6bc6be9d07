package unseen

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// CheckThenActInFlight is an in-flight retry budget with Envoy's rule
// (model.InFlight, model.EnvoyDefaults(): retries in flight fewer than
// max(3, 20% of the calls in flight)) kept in two atomic counters, calls
// and retries in flight, as failsafe-go's budget keeps them. Request,
// AttemptEnd and CallEnd are correct compare-and-swap loops on one counter
// each. Retry loads both counters, applies the rule, and then adds one to
// the retries.
//
// The bug: a check-then-act with two atomics. Nothing holds the retry
// count between the check and the add. With no calls and 2 retries in
// flight (the rule admits 3):
//
//  1. goroutine A, in Retry(Transient), loads 2 retries and 0 calls and
//     the rule admits one more (hook "checkthenact.admitted", before its
//     add);
//  2. goroutine B runs all of Retry(Transient): 2 < 3, adds one (3),
//     returns true;
//  3. A adds one (4) and returns true.
//
// Wrong outcome: over-grant. Four retries in flight where the rule allows
// three, and every order of the two calls grants one.
type CheckThenActInFlight struct {
	m              model.InFlight
	calls, retries atomic.Int64
}

// NewCheckThenActInFlight returns a budget following m (with the Envoy
// rule) with nothing in flight.
func NewCheckThenActInFlight(m model.InFlight) *CheckThenActInFlight {
	return &CheckThenActInFlight{m: m}
}

// Request counts a call in flight.
func (b *CheckThenActInFlight) Request() { incSat(&b.calls) }

// Retry grants a retry while the rule admits one more in flight.
func (b *CheckThenActInFlight) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	if b.retries.Load() >= envoyLimit(b.m, b.calls.Load()) {
		return false
	}
	hook("checkthenact.admitted")
	b.retries.Add(1)
	return true
}

// Success does nothing.
func (b *CheckThenActInFlight) Success(budget.Kind) {}

// AttemptEnd ends a retry in flight.
func (b *CheckThenActInFlight) AttemptEnd(k budget.Kind) {
	if k.IsRetry() {
		decPos(&b.retries)
	}
}

// CallEnd ends a call in flight.
func (b *CheckThenActInFlight) CallEnd() { decPos(&b.calls) }

// Available returns how many more retries the rule would grant now.
func (b *CheckThenActInFlight) Available() float64 {
	return float64(max(envoyLimit(b.m, b.calls.Load())-b.retries.Load(), 0))
}

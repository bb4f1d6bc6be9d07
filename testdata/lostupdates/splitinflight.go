package lostupdates

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// maxInFlight is where each in-flight count stops, as in the reference
// budget and model.InFlight.
const maxInFlight = 1<<32 - 1

// SplitAtomicsInFlight is Envoy's retry_budget (model.EnvoyDefaults():
// retries in flight may be 20% of the calls in flight, and at least 3 are
// always allowed) with the two counts in two atomics, so that the hot
// Request/CallEnd path never contends with the retry path. Every count
// changes by a compare-and-swap loop (saturating at 2^32-1, never below
// zero), and Retry reserves a retry slot with a CAS on the retries count.
// The calls count is read once, before the retry loop, since calls change
// far more often than retries and re-reading them on every spin was seen
// as wasted work.
//
// BUG: the decision uses a pair of counts that was never true at one
// instant: calls is loaded once, the retries count is loaded (and
// re-loaded after a failed CAS) later, so a Retry can be granted against
// calls that have since ended.
type SplitAtomicsInFlight struct {
	ppm     int64
	min     int64
	calls   atomic.Int64
	retries atomic.Int64
}

// NewSplitAtomicsInFlight returns a budget with nothing in flight.
func NewSplitAtomicsInFlight(ppm, minConcurrency int64) *SplitAtomicsInFlight {
	return &SplitAtomicsInFlight{ppm: ppm, min: minConcurrency}
}

func (b *SplitAtomicsInFlight) admits(retries, calls int64) bool {
	return retries < b.min || retries < b.ppm*calls/1_000_000
}

// Request counts a call in flight.
func (b *SplitAtomicsInFlight) Request() {
	for {
		c := b.calls.Load()
		if c == maxInFlight || b.calls.CompareAndSwap(c, c+1) {
			return
		}
	}
}

// Retry grants a retry while the rule admits one more in flight.
func (b *SplitAtomicsInFlight) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	calls := b.calls.Load()
	for {
		r := b.retries.Load()
		if r == maxInFlight || !b.admits(r, calls) {
			return false
		}
		if b.retries.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// Success does nothing.
func (b *SplitAtomicsInFlight) Success(budget.Kind) {}

// AttemptEnd ends a retry in flight when kind is a retry kind.
func (b *SplitAtomicsInFlight) AttemptEnd(kind budget.Kind) {
	if !kind.IsRetry() {
		return
	}
	for {
		r := b.retries.Load()
		if r == 0 || b.retries.CompareAndSwap(r, r-1) {
			return
		}
	}
}

// CallEnd ends a call in flight.
func (b *SplitAtomicsInFlight) CallEnd() {
	for {
		c := b.calls.Load()
		if c == 0 || b.calls.CompareAndSwap(c, c-1) {
			return
		}
	}
}

// Available returns how many more retries would be granted now, for
// metrics.
func (b *SplitAtomicsInFlight) Available() float64 {
	calls, retries := b.calls.Load(), b.retries.Load()
	limit := min(max(b.ppm*calls/1_000_000, b.min), maxInFlight)
	return float64(limit - min(retries, limit))
}

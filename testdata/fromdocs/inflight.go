package fromdocs

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// FailsafeModel is the rule AtomicInFlight follows: failsafe-go's rule with
// a maxRate of 0.3 and a minConcurrency of 1.
var FailsafeModel = model.InFlight{PPM: 300_000, MinConcurrency: 1, Rule: model.Failsafe}

// countMax is where each in-flight count stops.
const countMax = 1<<32 - 1

// AtomicInFlight is an in-flight retry budget with failsafe-go's rule
// (model.InFlight, Rule Failsafe): a retry is denied when the retries in
// flight are at least MinConcurrency and their share of the executions in
// flight, retries/(calls+retries), is above PPM/1e6. Both counts live in
// one atomic.Uint64 (calls in the low 32 bits, retries in the high 32
// bits), and every change is a compare-and-swap loop on it. Ends with
// nothing in flight are ignored, and each count stops at 2^32-1.
//
// Linearizability: each call's decision and update are made on one value
// of the word, and take effect at the compare-and-swap that installs the
// update (or, for a call that changes nothing, at the load it decided on):
// the word held exactly that value at that instant.
type AtomicInFlight struct {
	ppm, min int64
	word     atomic.Uint64
}

var _ budget.InFlightBudget = (*AtomicInFlight)(nil)

// NewAtomicInFlight returns a budget with nothing in flight following m,
// which must have Rule Failsafe.
func NewAtomicInFlight(m model.InFlight) *AtomicInFlight {
	if m.Rule != model.Failsafe {
		panic("fromdocs: AtomicInFlight implements failsafe-go's rule only")
	}
	return &AtomicInFlight{ppm: m.PPM, min: m.MinConcurrency}
}

func split(w uint64) (calls, retries int64) { return int64(w & countMax), int64(w >> 32) }

func (b *AtomicInFlight) admits(retries, calls int64) bool {
	if retries < b.min {
		return true
	}
	return retries*1_000_000 <= b.ppm*(calls+retries)
}

// change applies f to the word until its swap wins; f returns the new word
// and whether to write it.
func (b *AtomicInFlight) change(f func(calls, retries int64) (uint64, bool)) bool {
	for {
		w := b.word.Load()
		n, ok := f(split(w))
		if !ok {
			return false
		}
		if b.word.CompareAndSwap(w, n) {
			return true
		}
	}
}

// Request counts a call in flight.
func (b *AtomicInFlight) Request() {
	b.change(func(calls, retries int64) (uint64, bool) {
		return uint64(retries)<<32 | uint64(calls+1), calls < countMax
	})
}

// CallEnd ends a call in flight, if any.
func (b *AtomicInFlight) CallEnd() {
	b.change(func(calls, retries int64) (uint64, bool) {
		return uint64(retries)<<32 | uint64(calls-1), calls > 0
	})
}

// Retry grants a retry while the rule admits one more, and counts it in
// flight.
func (b *AtomicInFlight) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	return b.change(func(calls, retries int64) (uint64, bool) {
		return uint64(retries+1)<<32 | uint64(calls), retries < countMax && b.admits(retries, calls)
	})
}

// AttemptEnd ends a retry in flight, if kind is a retry kind and one is.
func (b *AtomicInFlight) AttemptEnd(kind budget.Kind) {
	if !kind.IsRetry() {
		return
	}
	b.change(func(calls, retries int64) (uint64, bool) {
		return uint64(retries-1)<<32 | uint64(calls), retries > 0
	})
}

// Success does nothing.
func (b *AtomicInFlight) Success(budget.Kind) {}

// Available returns how many more retries would be granted now.
func (b *AtomicInFlight) Available() float64 {
	calls, retries := split(b.word.Load())
	var limit int64
	if b.ppm >= 1_000_000 {
		limit = countMax
	} else {
		// The least count the rule denies: active(1e6-PPM) <= PPM×calls
		// holds up to ⌊PPM×calls/(1e6-PPM)⌋.
		limit = b.ppm*calls/(1_000_000-b.ppm) + 1
	}
	limit = min(max(limit, b.min), countMax)
	if retries >= limit {
		return 0
	}
	return float64(limit - retries)
}

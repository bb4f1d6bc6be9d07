package designs

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// PackedInFlight is an in-flight retry budget whose whole state is one
// atomic.Uint64: the retries in flight in its high 32 bits and the calls
// in flight in its low 32 bits. Each count stops at 2^32 - 1, so each fits
// its half exactly and no change of one ever carries into the other. Every
// call loads the word, computes the next word from it alone, and installs
// it with a compare-and-swap, starting over when another call got there
// first; a call whose next word is the word it loaded (a count at its
// bound, a denial) installs nothing.
//
// Linearizability: the word is the whole state, and it is changed only by
// compare-and-swap from a value a call loaded, so the successful swaps are
// totally ordered and each applies its call to exactly the state it
// replaced: no update is lost, and a Retry decides on both counts as they
// were together at the instant of its swap. A call is linearized at its
// successful swap, or, when it changes nothing, at its last load, where
// the state was the one it answered from. Only the value matters, so a
// word that left and came back (an ABA) swaps correctly. An AttemptEnd or
// a Retry of a kind that is not a retry kind touches nothing.
type PackedInFlight struct {
	cfg  InFlightConfig
	word atomic.Uint64 // retries<<32 | calls
}

var _ budget.InFlightBudget = (*PackedInFlight)(nil)

// NewPackedInFlight returns a PackedInFlight with nothing in flight.
func NewPackedInFlight(cfg InFlightConfig) *PackedInFlight {
	return &PackedInFlight{cfg: cfg}
}

func unpack(w uint64) (calls, retries int64) { return int64(w & maxInFlight), int64(w >> 32) }

func pack(calls, retries int64) uint64 { return uint64(retries)<<32 | uint64(calls) }

// update applies f to the state until its swap succeeds, or until f
// changes nothing, and returns f's answer.
func (b *PackedInFlight) update(f func(calls, retries int64) (nc, nr int64, granted bool)) bool {
	for {
		old := b.word.Load()
		nc, nr, granted := f(unpack(old))
		n := pack(nc, nr)
		if n == old || b.word.CompareAndSwap(old, n) {
			return granted
		}
	}
}

// Request counts a call in flight, unless 2^32 - 1 are.
func (b *PackedInFlight) Request() {
	b.update(func(calls, retries int64) (int64, int64, bool) {
		return min(calls+1, maxInFlight), retries, false
	})
}

// CallEnd ends a call in flight; it does nothing when none is.
func (b *PackedInFlight) CallEnd() {
	b.update(func(calls, retries int64) (int64, int64, bool) {
		return max(calls-1, 0), retries, false
	})
}

// Retry grants a retry of a retry kind while the rule admits one more
// retry in flight, and counts it in flight.
func (b *PackedInFlight) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	return b.update(func(calls, retries int64) (int64, int64, bool) {
		if !b.cfg.admits(retries, calls) {
			return calls, retries, false
		}
		return calls, retries + 1, true
	})
}

// AttemptEnd ends a retry in flight when k is a retry kind and one is in
// flight.
func (b *PackedInFlight) AttemptEnd(k budget.Kind) {
	if !k.IsRetry() {
		return
	}
	b.update(func(calls, retries int64) (int64, int64, bool) {
		return calls, max(retries-1, 0), false
	})
}

// Success does nothing: the budget recovers as retries end.
func (b *PackedInFlight) Success(budget.Kind) {}

// Available returns how many more retries would be granted now, with
// nothing else changing.
func (b *PackedInFlight) Available() float64 {
	calls, retries := unpack(b.word.Load())
	return b.cfg.available(retries, calls)
}

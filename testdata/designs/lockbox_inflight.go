package designs

import (
	"example.com/lockbox"

	"github.com/retrybudget/retrybudget/budget"
)

// LockboxInFlight is an in-flight retry budget that keeps no lock of its
// own: its two counts, the calls and the retries in flight, live in a
// lockbox.Pair, a struct of a separate module (example.com/lockbox, nested
// in this directory with a go.mod of its own) whose methods take that
// module's own sync.Mutex around all they do. Every call of the budget is
// one Pair.Update with a pure function of the two counts, or one Pair.Load.
//
// Linearizability: Pair.Update holds the Pair's mutex while it reads both
// counts, calls the function and stores its result, so each call of the
// budget is one critical section of that mutex over the whole state, and
// is linearized inside it. The function never calls the Pair back, so
// nothing deadlocks. An AttemptEnd of a kind that is not a retry kind, and
// a Retry of one, change nothing and take no lock.
type LockboxInFlight struct {
	cfg InFlightConfig
	box lockbox.Pair // a: calls in flight, b: retries in flight
}

var _ budget.InFlightBudget = (*LockboxInFlight)(nil)

// NewLockboxInFlight returns a LockboxInFlight with nothing in flight.
func NewLockboxInFlight(cfg InFlightConfig) *LockboxInFlight {
	return &LockboxInFlight{cfg: cfg}
}

// Request counts a call in flight, unless 2^32 - 1 are.
func (b *LockboxInFlight) Request() {
	b.box.Update(func(calls, retries int64) (int64, int64, bool) {
		if calls < maxInFlight {
			calls++
		}
		return calls, retries, false
	})
}

// CallEnd ends a call in flight; it does nothing when none is.
func (b *LockboxInFlight) CallEnd() {
	b.box.Update(func(calls, retries int64) (int64, int64, bool) {
		if calls > 0 {
			calls--
		}
		return calls, retries, false
	})
}

// Retry grants a retry of a retry kind while the rule admits one more
// retry in flight, and counts it in flight.
func (b *LockboxInFlight) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	return b.box.Update(func(calls, retries int64) (int64, int64, bool) {
		if !b.cfg.admits(retries, calls) {
			return calls, retries, false
		}
		return calls, retries + 1, true
	})
}

// AttemptEnd ends a retry in flight when k is a retry kind and one is in
// flight.
func (b *LockboxInFlight) AttemptEnd(k budget.Kind) {
	if !k.IsRetry() {
		return
	}
	b.box.Update(func(calls, retries int64) (int64, int64, bool) {
		if retries > 0 {
			retries--
		}
		return calls, retries, false
	})
}

// Success does nothing: the budget recovers as retries end.
func (b *LockboxInFlight) Success(budget.Kind) {}

// Available returns how many more retries would be granted now, with
// nothing else changing.
func (b *LockboxInFlight) Available() float64 {
	calls, retries := b.box.Load()
	return b.cfg.available(retries, calls)
}

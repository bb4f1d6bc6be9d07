package zoo

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// flight is an immutable state of a FailsafeRuleInFlight.
type flight struct{ calls, retries int64 }

// FailsafeRuleInFlight is failsafe-go's budget rule (v0.9.8): a retry is
// denied when the retries in flight are at least minConcurrency and their
// share of the executions in flight, retries/(calls + retries), is above
// maxRate. The counts are an immutable snapshot behind an atomic.Pointer,
// replaced by compare-and-swap; a call that would change nothing installs
// nothing. Ends of nothing in flight are ignored, and each count stops at
// 2^32 - 1.
type FailsafeRuleInFlight struct {
	ppm, minConc int64 // maxRate in parts per million
	state        atomic.Pointer[flight]
}

var noFlight = &flight{}

// NewFailsafeRuleInFlight returns a budget with nothing in flight; ppm is
// failsafe-go's maxRate × 1e6.
func NewFailsafeRuleInFlight(ppm, minConcurrency int64) *FailsafeRuleInFlight {
	b := &FailsafeRuleInFlight{ppm: ppm, minConc: minConcurrency}
	b.state.Store(noFlight)
	return b
}

// swap installs f(*old) until it wins; f returns false to keep old.
func (b *FailsafeRuleInFlight) swap(f func(s flight) (flight, bool)) bool {
	for {
		old := b.state.Load()
		nu, ok := f(*old)
		if !ok {
			return false
		}
		if b.state.CompareAndSwap(old, &nu) {
			return true
		}
	}
}

// admits applies the rule: retries/(calls+retries) <= ppm/1e6, in integers.
func (b *FailsafeRuleInFlight) admits(s flight) bool {
	if s.retries >= inflightMax {
		return false
	}
	return s.retries < b.minConc || s.retries*1_000_000 <= b.ppm*(s.calls+s.retries)
}

func (b *FailsafeRuleInFlight) Request() {
	b.swap(func(s flight) (flight, bool) {
		s.calls++
		return s, s.calls <= inflightMax
	})
}

func (b *FailsafeRuleInFlight) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	return b.swap(func(s flight) (flight, bool) {
		if !b.admits(s) {
			return s, false
		}
		s.retries++
		return s, true
	})
}

func (b *FailsafeRuleInFlight) Success(budget.Kind) {}

func (b *FailsafeRuleInFlight) AttemptEnd(k budget.Kind) {
	if !k.IsRetry() {
		return
	}
	b.swap(func(s flight) (flight, bool) {
		s.retries--
		return s, s.retries >= 0
	})
}

func (b *FailsafeRuleInFlight) CallEnd() {
	b.swap(func(s flight) (flight, bool) {
		s.calls--
		return s, s.calls >= 0
	})
}

// Available returns how many more retries would be granted now: the count
// at which the rule first says no, less the retries in flight.
func (b *FailsafeRuleInFlight) Available() float64 {
	s := *b.state.Load()
	var limit int64
	if b.ppm >= 1_000_000 {
		limit = inflightMax
	} else {
		// r×1e6 <= ppm×(c+r) ⟺ r <= ppm×c/(1e6-ppm): the first r denied is one more.
		limit = b.ppm*s.calls/(1_000_000-b.ppm) + 1
	}
	limit = min(max(limit, b.minConc), inflightMax)
	if s.retries >= limit {
		return 0
	}
	return float64(limit - s.retries)
}

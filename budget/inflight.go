package budget

import (
	"math"
	"sync/atomic"
)

// maxInFlight is the most calls, and the most retries, an InFlight counts
// in flight; a count at it stays there.
const maxInFlight = 1<<32 - 1

// InFlightConfig configures an [InFlight]. Start from
// [DefaultInFlightConfig] and change what you need.
type InFlightConfig struct {
	// Ratio is the share of the calls in flight that may be retries in
	// flight, in [0, 1]. It is kept to six decimals (parts per million).
	Ratio float64
	// MinConcurrency is how many retries in flight are always allowed,
	// however few the calls, so that low traffic can still retry. It must
	// be in [0, 4294967295].
	MinConcurrency int
}

// DefaultInFlightConfig returns Envoy's retry_budget with its defaults:
// retries in flight may be 20% of the calls in flight, and at least 3 are
// always allowed.
func DefaultInFlightConfig() InFlightConfig {
	return InFlightConfig{Ratio: 0.2, MinConcurrency: 3}
}

// An InFlight is a retry budget that caps the retries in flight at a share
// of the calls in flight, as Envoy's retry_budget does: a retry is granted
// while the retries in flight are fewer than max(MinConcurrency, ⌊Ratio ×
// calls in flight⌋), the product taken exactly in parts per million.
//
// A call is in flight from its Request to its CallEnd; a retry from the
// Retry that grants it to its AttemptEnd, so through its backoff wait and
// its attempt. Nothing is earned or spent over time: the budget recovers
// as retries end, and it never reads a clock. It must be told when
// attempts and calls end (see [InFlightBudget]); [Retrier] does that.
// Success does nothing, and neither does AttemptEnd(FirstAttempt). An end
// with nothing in flight is ignored, so the counts never go below zero,
// and a count that reaches 2^32 - 1 stays there.
//
// Both counts live in one 64-bit word, and every call is one
// compare-and-swap loop on it (a single load for a Retry that is denied),
// so a grant is decided on the counts as they are at that instant. A call
// allocates nothing.
//
// The zero value denies every retry; use [NewInFlight].
//
// InFlight is safe for concurrent use by multiple goroutines.
type InFlight struct {
	// Read-only after construction.
	ratio int64 // parts per million
	min   uint64

	_ cacheLinePad
	// state holds the calls in flight in its high 32 bits and the
	// retries in flight in its low 32 bits. It changes only by
	// compare-and-swap.
	state  atomic.Uint64
	counts counts
	_      cacheLinePad
}

var _ InFlightBudget = (*InFlight)(nil)

// NewInFlight returns an InFlight with nothing in flight, configured by c,
// or an error wrapping [ErrInvalidConfig] that names the first field out
// of range.
func NewInFlight(c InFlightConfig) (*InFlight, error) {
	if math.IsNaN(c.Ratio) || c.Ratio < 0 || c.Ratio > 1 {
		return nil, configError("InFlightConfig.Ratio", c.Ratio, "in [0, 1]")
	}
	if c.MinConcurrency < 0 || uint64(c.MinConcurrency) > maxInFlight {
		return nil, configError("InFlightConfig.MinConcurrency", c.MinConcurrency, "in [0, 4294967295]")
	}
	return &InFlight{ratio: int64(math.Round(c.Ratio * ppm)), min: uint64(c.MinConcurrency)}, nil
}

const lowWord = 1<<32 - 1

// admits reports whether a retry may be granted with retries and calls in
// flight. ratio × calls is at most 1e6 × 2^32, far from overflow.
func (b *InFlight) admits(retries, calls uint64) bool {
	return retries < b.min || retries < uint64(b.ratio)*calls/ppm
}

// Request counts a call in flight.
func (b *InFlight) Request() {
	for {
		s := b.state.Load()
		if s>>32 == maxInFlight || b.state.CompareAndSwap(s, s+1<<32) {
			return
		}
	}
}

// Retry grants a retry of a retry kind while the rule admits one more
// retry in flight, and counts it in flight; a kind that is not a retry kind
// is denied.
func (b *InFlight) Retry(kind Kind) bool { return b.counts.count(b.retry(kind)) }

// Stats returns the retries granted and denied so far.
func (b *InFlight) Stats() Stats { return b.counts.stats() }

func (b *InFlight) retry(kind Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	for {
		s := b.state.Load()
		retries := s & lowWord
		if retries == maxInFlight || !b.admits(retries, s>>32) {
			return false
		}
		if b.state.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// Success does nothing: an InFlight recovers as retries end.
func (b *InFlight) Success(Kind) {}

// AttemptEnd ends a retry in flight when kind is a retry kind; it does
// nothing for FirstAttempt, or when no retry is in flight.
func (b *InFlight) AttemptEnd(kind Kind) {
	if !kind.IsRetry() {
		return
	}
	for {
		s := b.state.Load()
		if s&lowWord == 0 || b.state.CompareAndSwap(s, s-1) {
			return
		}
	}
}

// CallEnd ends a call in flight; it does nothing when none is.
func (b *InFlight) CallEnd() {
	for {
		s := b.state.Load()
		if s>>32 == 0 || b.state.CompareAndSwap(s, s-1<<32) {
			return
		}
	}
}

// InFlight returns the calls and the retries in flight, read together.
func (b *InFlight) InFlight() (calls, retries int) {
	s := b.state.Load()
	return int(s >> 32), int(s & lowWord)
}

// Available returns how many more retries the budget would grant now,
// with nothing else changing.
func (b *InFlight) Available() float64 {
	s := b.state.Load()
	calls, retries := s>>32, s&lowWord
	limit := max(b.min, uint64(b.ratio)*calls/ppm)
	return float64(limit - min(retries, limit)) // none when retries fill the limit, or more
}

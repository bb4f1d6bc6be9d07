package classes

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// CASInFlight is Envoy's retry budget with both counts in one 64-bit word
// (calls in the high half, retries in the low half), every call a
// compare-and-swap loop on it. Correct, unlike StaleLimitInFlight: each
// turn of Retry's loop decides on the word it loaded in that turn, limit
// included, and swaps only that word, so a grant is decided on the counts
// as they are at the instant of the swap.
type CASInFlight struct {
	m     model.InFlight
	state atomic.Uint64 // calls << 32 | retries
}

// NewCASInFlight returns an empty budget with m's parameters; m.Rule must
// be model.Envoy.
func NewCASInFlight(m model.InFlight) *CASInFlight {
	if m.Rule != model.Envoy {
		panic("CASInFlight: Envoy's rule only")
	}
	return &CASInFlight{m: m}
}

// Request counts a call in flight.
func (b *CASInFlight) Request() {
	for {
		s := b.state.Load()
		if s>>32 == maxCount || b.state.CompareAndSwap(s, s+1<<32) {
			return
		}
	}
}

// CallEnd ends a call in flight.
func (b *CASInFlight) CallEnd() {
	for {
		s := b.state.Load()
		if s>>32 == 0 || b.state.CompareAndSwap(s, s-1<<32) {
			return
		}
	}
}

// Retry grants a retry while the retries in flight are below the limit.
func (b *CASInFlight) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	for {
		s := b.state.Load()
		r := s & lowHalf
		if r == maxCount || int64(r) >= envoyLimit(b.m, int64(s>>32)) {
			return false
		}
		if b.state.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// Success does nothing.
func (b *CASInFlight) Success(budget.Kind) {}

// AttemptEnd ends a retry in flight.
func (b *CASInFlight) AttemptEnd(kind budget.Kind) {
	if !kind.IsRetry() {
		return
	}
	for {
		s := b.state.Load()
		if s&lowHalf == 0 || b.state.CompareAndSwap(s, s-1) {
			return
		}
	}
}

// Available returns how many more retries the rule admits now.
func (b *CASInFlight) Available() float64 {
	s := b.state.Load()
	return ifAvailable(envoyLimit(b.m, int64(s>>32)), int64(s&lowHalf))
}

package classes

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// StaleLimitInFlight is Envoy's retry budget with both counts in one
// 64-bit word (calls in the high half, retries in the low half), every
// call a compare-and-swap loop on it. Retry computes the limit,
// max(MinConcurrency, ⌊PPM × calls / 1e6⌋), once, from the word it loads
// first, and computes it again in its loop only when the calls in flight
// have fallen below that word's; its authors reasoned that more calls only
// raise the limit, so an old limit is never too generous.
//
// Class 4, in-flight family (model.EnvoyDefaults(): 20%, at least 3).
//
// Bug: the loop compares the current retries in flight against a limit
// computed from old calls in flight. One call of another goroutine in
// between is harmless: a request alone leaves the retries, which the old
// limit judges as the old word would; a retry alone, or an end, leaves the
// calls and so the limit as they were; a call's end lowers the calls and
// the limit is computed again. It takes two calls, a request that raises the
// limit and a retry that takes the new room, to part it from the model.
// With 19 calls and 2 retries in flight (limit 3):
//
//	g1: Retry: loads (19, 2), limit 3
//	g2: Request: (20, 2) (limit 4)
//	g2: Retry: 2 < 4 → (20, 3), granted
//	g1: its compare-and-swap fails; loads (20, 3): 3 ≥ 3 → denied
//
// In every order g1's retry is the 3rd or the 4th in flight with 19 or 20
// calls, and the model grants it (an under-grant). The wrong answer needs g1
// preempted after it computed the limit while g2 makes two calls (testHook
// point "stale.inflight.limit").
type StaleLimitInFlight struct {
	m     model.InFlight
	state atomic.Uint64 // calls << 32 | retries
}

// NewStaleLimitInFlight returns an empty budget with m's parameters; m.Rule
// must be model.Envoy.
func NewStaleLimitInFlight(m model.InFlight) *StaleLimitInFlight {
	if m.Rule != model.Envoy {
		panic("StaleLimitInFlight: Envoy's rule only")
	}
	return &StaleLimitInFlight{m: m}
}

const lowHalf = 1<<32 - 1

// Request counts a call in flight.
func (b *StaleLimitInFlight) Request() {
	for {
		s := b.state.Load()
		if s>>32 == maxCount || b.state.CompareAndSwap(s, s+1<<32) {
			return
		}
	}
}

// CallEnd ends a call in flight.
func (b *StaleLimitInFlight) CallEnd() {
	for {
		s := b.state.Load()
		if s>>32 == 0 || b.state.CompareAndSwap(s, s-1<<32) {
			return
		}
	}
}

// Retry grants a retry while the retries in flight are below the limit.
func (b *StaleLimitInFlight) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	s := b.state.Load()
	calls := s >> 32
	limit := uint64(envoyLimit(b.m, int64(calls)))
	hook("stale.inflight.limit")
	for {
		if c := s >> 32; c < calls { // fewer calls: a lower limit
			calls, limit = c, uint64(envoyLimit(b.m, int64(c)))
		}
		r := s & lowHalf
		if r == maxCount || r >= limit {
			return false
		}
		if b.state.CompareAndSwap(s, s+1) {
			return true
		}
		s = b.state.Load()
	}
}

// Success does nothing.
func (b *StaleLimitInFlight) Success(budget.Kind) {}

// AttemptEnd ends a retry in flight.
func (b *StaleLimitInFlight) AttemptEnd(kind budget.Kind) {
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
func (b *StaleLimitInFlight) Available() float64 {
	s := b.state.Load()
	return ifAvailable(envoyLimit(b.m, int64(s>>32)), int64(s&lowHalf))
}

package classes

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// LateLimitInFlight is Envoy's retry budget, under a mutex, that caches its
// limit, max(MinConcurrency, ⌊PPM × calls / 1e6⌋), in an atomic: Request
// and CallEnd compute the new limit under the mutex and store it after the
// unlock, and Retry compares the retries in flight against the cache.
//
// Class 2, in-flight family (model.EnvoyDefaults(): 20%, at least 3).
//
// Bug: the cached limit is published outside the critical section, so a
// stale limit can overwrite a fresh one. With 19 calls and 3 retries in
// flight:
//
//	g1: Request: lock, 20 calls, limit' = 4, unlock
//	g2: CallEnd: lock, 19 calls, limit' = 3, unlock, store limit = 3
//	g1: store limit = 4
//	g3: Retry: 3 retries < 4 → granted
//
// 19 calls are in flight, whose limit is 3, and 3 retries already are: the
// model denies the retry whatever the order of the request and the end;
// the budget grants a 4th (an over-grant), and keeps granting to the stale
// limit until the next request or end. The wrong answer needs g1 preempted
// between its unlock and its store (testHook point
// "latelimit.inflight.publish").
type LateLimitInFlight struct {
	m model.InFlight

	mu      sync.Mutex
	calls   int64 // guarded by mu
	retries int64 // guarded by mu
	limit   atomic.Int64
}

// NewLateLimitInFlight returns an empty budget with m's parameters; m.Rule
// must be model.Envoy.
func NewLateLimitInFlight(m model.InFlight) *LateLimitInFlight {
	if m.Rule != model.Envoy {
		panic("LateLimitInFlight: Envoy's rule only")
	}
	b := &LateLimitInFlight{m: m}
	b.limit.Store(envoyLimit(m, 0))
	return b
}

// Request counts a call in flight.
func (b *LateLimitInFlight) Request() {
	b.mu.Lock()
	if b.calls < maxCount {
		b.calls++
	}
	limit := envoyLimit(b.m, b.calls)
	b.mu.Unlock()
	hook("latelimit.inflight.publish")
	b.limit.Store(limit)
}

// CallEnd ends a call in flight.
func (b *LateLimitInFlight) CallEnd() {
	b.mu.Lock()
	if b.calls > 0 {
		b.calls--
	}
	limit := envoyLimit(b.m, b.calls)
	b.mu.Unlock()
	hook("latelimit.inflight.publish")
	b.limit.Store(limit)
}

// Retry grants a retry while the retries in flight are below the cached
// limit.
func (b *LateLimitInFlight) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retries >= maxCount || b.retries >= b.limit.Load() {
		return false
	}
	b.retries++
	return true
}

// Success does nothing.
func (b *LateLimitInFlight) Success(budget.Kind) {}

// AttemptEnd ends a retry in flight.
func (b *LateLimitInFlight) AttemptEnd(kind budget.Kind) {
	if !kind.IsRetry() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retries > 0 {
		b.retries--
	}
}

// Available returns how many more retries the rule admits now, computed
// from the counts.
func (b *LateLimitInFlight) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return ifAvailable(envoyLimit(b.m, b.calls), b.retries)
}

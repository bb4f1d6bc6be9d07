package classes

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// LateFullFlagThrottle is gRPC's retry throttling, under a mutex, with a
// lock-free fast path for healthy traffic: a flag, full, says the count is
// at its maximum, and Success returns at once, without the lock, while it
// is set (a success at the maximum changes nothing). Every call computes
// the flag under the mutex and stores it after the unlock.
//
// Class 2, throttle family (model.Throttle{Max: 10_000, Ratio: 100}).
//
// Bug: the flag is published outside the critical section, so a stale
// "full" can overwrite a fresh "not full". From 9.9 tokens:
//
//	g1: Success: lock, 9.9 → 10 tokens, full' = true, unlock
//	g2: Retry: lock, 10 → 9 tokens, granted, full' = false, unlock, store full = false
//	g1: store full = true
//	g2: Success: full is set → returns, adding nothing
//
// The count is 9 where every order of the calls leaves 9.1 (a lost credit),
// and it stays 0.1 token behind the model: 4 retries then leave 5 tokens,
// and the 4th is denied where the model, at 5.1, grants it (an
// under-grant). The wrong answer needs g1 preempted between its unlock and
// its store (testHook point "lateflag.throttle.success").
type LateFullFlagThrottle struct {
	max   int64
	ratio int64

	mu     sync.Mutex
	tokens int64 // milli-tokens; guarded by mu
	full   atomic.Bool
}

// NewLateFullFlagThrottle returns a full throttle with m's parameters.
func NewLateFullFlagThrottle(m model.Throttle) *LateFullFlagThrottle {
	t := &LateFullFlagThrottle{max: m.Max, ratio: m.Ratio, tokens: m.Max}
	t.full.Store(true)
	return t
}

// Request does nothing.
func (t *LateFullFlagThrottle) Request() {}

// Retry takes a token and reports whether more than half the maximum is
// left.
func (t *LateFullFlagThrottle) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	t.mu.Lock()
	t.tokens = max(t.tokens-milli, 0)
	granted := 2*t.tokens > t.max
	full := t.tokens == t.max
	t.mu.Unlock()
	hook("lateflag.throttle.retry")
	t.full.Store(full)
	return granted
}

// Success adds the ratio, up to the maximum.
func (t *LateFullFlagThrottle) Success(budget.Kind) {
	if t.full.Load() {
		return // fast path: nothing to add to
	}
	t.mu.Lock()
	t.tokens = min(t.tokens+t.ratio, t.max)
	full := t.tokens == t.max
	t.mu.Unlock()
	hook("lateflag.throttle.success")
	t.full.Store(full)
}

// Available returns the token count.
func (t *LateFullFlagThrottle) Available() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return float64(t.tokens) / milli
}

package escapes

import (
	"fmt"
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// SafeKeyedInFlightModel is the rule each key of a SafeKeyedInFlight
// follows, on its own: Envoy's retry_budget defaults, retries in flight
// fewer than max(3, 20% of the calls in flight).
var SafeKeyedInFlightModel = model.EnvoyDefaults()

// EvictIdleInFlightModel is the rule each key of an EvictIdleInFlight
// claims to follow: the same.
var EvictIdleInFlightModel = SafeKeyedInFlightModel

// KeyedIdleTimeout is the idle timeout of the views NewEvictIdleInFlightView
// and NewSafeKeyedInFlightView return.
const KeyedIdleTimeout = time.Minute

const maxFlight = 1<<32 - 1

// flight is one key's counts.
type flight struct {
	calls, retries int64
	lastStart      time.Duration // latest Request or granted Retry, as the forward-only clock read it
}

// inFlightCore is what both keyed in-flight budgets share. Every call runs
// under one mutex: it reads the clock, sweeps idle keys (at most once per
// quarter of the timeout), and applies the call to its key.
type inFlightCore struct {
	m     model.InFlight
	idle  time.Duration
	clock budget.Clock

	mu    sync.Mutex
	seen  time.Duration // latest clock reading seen
	swept time.Duration
	keys  map[string]*flight
}

func newInFlightCore(m model.InFlight, idle time.Duration, clock budget.Clock) inFlightCore {
	if err := m.Validate(); err != nil {
		panic(fmt.Sprintf("escapes: %v", err))
	}
	if idle <= 0 || clock == nil {
		panic("escapes: a keyed in-flight budget needs a positive idle timeout and a clock")
	}
	now := clock.Now()
	return inFlightCore{m: m, idle: idle, clock: clock, seen: now, swept: now, keys: make(map[string]*flight)}
}

func (c *inFlightCore) admits(retries, calls int64) bool {
	if retries < c.m.MinConcurrency {
		return true
	}
	if c.m.Rule == model.Failsafe {
		return retries*1_000_000 <= c.m.PPM*(calls+retries)
	}
	return retries < c.m.PPM*calls/1_000_000
}

// since returns how long ago, by the forward-only clock, t was.
func (c *inFlightCore) since(t time.Duration) uint64 { return uint64(c.seen) - uint64(t) }

// do applies one call to key, sweeping first; drop says which idle keys
// may go. c.mu must not be held.
func (c *inFlightCore) do(key string, op model.OpKind, kind budget.Kind, drop func(*flight) bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.clock.Now(); now > c.seen {
		c.seen = now
	}
	if c.since(c.swept) >= uint64(c.idle/4) {
		c.swept = c.seen
		for k, f := range c.keys {
			if c.since(f.lastStart) >= uint64(c.idle) && drop(f) {
				delete(c.keys, k)
			}
		}
	}
	f := c.keys[key]
	if f == nil {
		f = &flight{lastStart: c.seen}
		c.keys[key] = f
	}
	switch op {
	case model.Request:
		if f.calls < maxFlight {
			f.calls++
		}
		f.lastStart = c.seen
	case model.CallEnd:
		if f.calls > 0 {
			f.calls--
		}
	case model.Retry:
		if !kind.IsRetry() || f.retries == maxFlight || !c.admits(f.retries, f.calls) {
			return false
		}
		f.retries++
		f.lastStart = c.seen
		return true
	case model.AttemptEnd:
		if kind.IsRetry() && f.retries > 0 {
			f.retries--
		}
	}
	return false
}

// Len returns the number of keys held.
func (c *inFlightCore) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.keys)
}

// inFlightView is one key of a keyed in-flight budget.
type inFlightView struct {
	c    *inFlightCore
	key  string
	drop func(*flight) bool
}

var _ budget.InFlightBudget = (*inFlightView)(nil)

func (v *inFlightView) Request() { v.c.do(v.key, model.Request, budget.FirstAttempt, v.drop) }
func (v *inFlightView) Retry(kind budget.Kind) bool {
	return v.c.do(v.key, model.Retry, kind, v.drop)
}
func (v *inFlightView) Success(kind budget.Kind)    { v.c.do(v.key, model.Success, kind, v.drop) }
func (v *inFlightView) AttemptEnd(kind budget.Kind) { v.c.do(v.key, model.AttemptEnd, kind, v.drop) }
func (v *inFlightView) CallEnd()                    { v.c.do(v.key, model.CallEnd, budget.FirstAttempt, v.drop) }

// ---------------------------------------------------------------------------
// EvictIdleInFlight: the mutant.

// EvictIdleInFlight holds an Envoy-style in-flight budget per key and drops
// a key when no call or retry has started on it for the idle timeout, by
// the clock.
//
// BUG (deliberate): "idle" is judged by starts only. A key whose calls or
// retries are still in flight, but on which nothing has started for the
// timeout (long calls, a slow dependency: exactly when a retry budget
// matters), is dropped, and its calls and retries in flight are forgotten:
// the key's next Retry is judged as if nothing were in flight, and granted
// where the model denies it; ends that come later are ignored. Within the
// timeout its answers are exactly its model's.
type EvictIdleInFlight struct{ inFlightCore }

// NewEvictIdleInFlight returns an empty EvictIdleInFlight: one budget
// following m per key, keys dropped after idle without a start.
func NewEvictIdleInFlight(m model.InFlight, idle time.Duration, clock budget.Clock) *EvictIdleInFlight {
	return &EvictIdleInFlight{newInFlightCore(m, idle, clock)}
}

func dropIdle(*flight) bool { return true }

// Budget returns the budget of one key.
func (k *EvictIdleInFlight) Budget(key string) budget.InFlightBudget {
	return &inFlightView{c: &k.inFlightCore, key: key, drop: dropIdle}
}

// NewEvictIdleInFlightView returns the budget of key "a" of an
// EvictIdleInFlight following EvictIdleInFlightModel with an idle timeout
// of KeyedIdleTimeout.
func NewEvictIdleInFlightView(clock budget.Clock) budget.InFlightBudget {
	return NewEvictIdleInFlight(EvictIdleInFlightModel, KeyedIdleTimeout, clock).Budget("a")
}

// ---------------------------------------------------------------------------
// SafeKeyedInFlight: the twin.

// SafeKeyedInFlight is EvictIdleInFlight that drops an idle key only when
// nothing is in flight on it: no call and no retry. Such a key's state is
// the model's initial state, so dropping it loses nothing, and one key
// follows SafeKeyedInFlightModel (or the model.InFlight it is built with)
// exactly, whatever the clock does (the clock decides only when keys are
// dropped, never an answer).
type SafeKeyedInFlight struct{ inFlightCore }

// NewSafeKeyedInFlight returns an empty SafeKeyedInFlight: one budget
// following m per key, keys with nothing in flight dropped after idle.
func NewSafeKeyedInFlight(m model.InFlight, idle time.Duration, clock budget.Clock) *SafeKeyedInFlight {
	return &SafeKeyedInFlight{newInFlightCore(m, idle, clock)}
}

func dropQuiet(f *flight) bool { return f.calls == 0 && f.retries == 0 }

// Budget returns the budget of one key.
func (k *SafeKeyedInFlight) Budget(key string) budget.InFlightBudget {
	return &inFlightView{c: &k.inFlightCore, key: key, drop: dropQuiet}
}

// NewSafeKeyedInFlightView returns the budget of key "a" of a
// SafeKeyedInFlight following SafeKeyedInFlightModel with an idle timeout
// of KeyedIdleTimeout.
func NewSafeKeyedInFlightView(clock budget.Clock) budget.InFlightBudget {
	return NewSafeKeyedInFlight(SafeKeyedInFlightModel, KeyedIdleTimeout, clock).Budget("a")
}

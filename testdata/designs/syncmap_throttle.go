package designs

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// SyncMapThrottle is gRPC retry throttling (gRFC A6) kept in a sync.Map: the
// token count is the entry under tokensKey, an int64 changed only by
// sync.Map.CompareAndSwap in a load-compute-swap loop, and the map also
// holds per-kind statistics, one *atomic.Int64 per (kind, outcome), created
// on first use by LoadOrStore. The statistics never feed an answer.
//
// Linearizability: sync.Map's Load and CompareAndSwap on one key are
// atomic and totally ordered (the map's documentation: CompareAndSwap
// swaps only if the value stored is equal to old). A Retry or Success
// loads the count, computes the next from it alone, and swaps it in only
// if the entry still holds what was loaded; it is linearized at its
// successful swap, or, when the next count equals the loaded one (a
// throttle already at zero, or full), at its load, where the count was
// what it answered from. Values are boxed int64s compared by ==, so a
// count that left and came back (an ABA) swaps correctly: only the value
// matters, and the value is the whole state.
type SyncMapThrottle struct {
	cfg ThrottleConfig
	m   sync.Map
}

var _ budget.Budget = (*SyncMapThrottle)(nil)

// tokensKey is the map key of the token count.
type tokensKey struct{}

// statKey is the map key of one per-kind statistic.
type statKey struct {
	kind    budget.Kind
	granted bool
}

// NewSyncMapThrottle returns a full SyncMapThrottle.
func NewSyncMapThrottle(cfg ThrottleConfig) *SyncMapThrottle {
	t := &SyncMapThrottle{cfg: cfg}
	t.m.Store(tokensKey{}, cfg.Max)
	return t
}

func (t *SyncMapThrottle) load() int64 {
	v, _ := t.m.Load(tokensKey{})
	return v.(int64)
}

// Request does nothing.
func (t *SyncMapThrottle) Request() {}

// Retry takes one token for a retryable failure of kind k and reports
// whether more than half the maximum is left. A kind that is not a retry
// kind is denied and takes nothing.
func (t *SyncMapThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	for {
		old := t.load()
		n, ok := t.cfg.retry(old)
		if n == old || t.m.CompareAndSwap(tokensKey{}, old, n) {
			t.count(k, ok)
			return ok
		}
	}
}

// Success adds the ratio's tokens, up to the maximum, whatever the kind.
func (t *SyncMapThrottle) Success(budget.Kind) {
	for {
		old := t.load()
		n := t.cfg.success(old)
		if n == old || t.m.CompareAndSwap(tokensKey{}, old, n) {
			return
		}
	}
}

// Available returns the token count.
func (t *SyncMapThrottle) Available() float64 { return float64(t.load()) / milli }

// count adds one to the statistic of kind k and its outcome.
func (t *SyncMapThrottle) count(k budget.Kind, granted bool) {
	key := statKey{kind: k, granted: granted}
	v, ok := t.m.Load(key)
	if !ok {
		v, _ = t.m.LoadOrStore(key, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

// Stats returns how many retries of kind k were granted and denied.
func (t *SyncMapThrottle) Stats(k budget.Kind) (granted, denied int64) {
	if v, ok := t.m.Load(statKey{kind: k, granted: true}); ok {
		granted = v.(*atomic.Int64).Load()
	}
	if v, ok := t.m.Load(statKey{kind: k, granted: false}); ok {
		denied = v.(*atomic.Int64).Load()
	}
	return granted, denied
}

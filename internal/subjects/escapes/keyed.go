package escapes

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// SafeKeyedModel is the rule each key of a SafeKeyed follows, on its own: a
// bucket of 10 tokens without refill; a transient retry costs 2, a
// throttled one 1, a successful retry refunds its cost, a successful first
// attempt earns 0.5.
var SafeKeyedModel = model.TokenBucket{Capacity: 10_000, TransientCost: 2_000, ThrottledCost: 1_000, SuccessBonus: 500}

// EvictFullQuotaModel is the rule each key of an EvictFullQuota claims to
// follow: the same.
var EvictFullQuotaModel = SafeKeyedModel

// KeyedViewKeys are the keys of the views NewEvictFullQuotaView and
// NewSafeKeyedView return: the view serves the first; each of its calls
// first touches the others, so that with a bound of 2 keys every call
// makes the budget drop one.
var KeyedViewKeys = []string{"a", "b", "c"}

// quota is one key's bucket. The bucket has no refill, so a full quota is
// exactly a new one: dropping it loses nothing, and that is the only kind
// of quota either keyed budget drops.
type quota struct {
	mu       sync.Mutex
	t        tokens
	lastUsed atomic.Int64 // clock reading of the latest use, for the choice of whom to drop
	pins     atomic.Int32 // calls holding this quota (SafeKeyed only)
}

func (q *quota) isFull() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.t.full()
}

func (q *quota) apply(op actorOp, kind budget.Kind) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch op {
	case opRetry:
		return kind.IsRetry() && q.t.take(kind)
	case opSuccess:
		q.t.deposit(kind)
	}
	return false
}

// keyedCore is what both keyed budgets share: the map, its bound, and the
// choice of which quota to drop (the least recently used full one).
type keyedCore struct {
	m     model.TokenBucket
	max   int
	clock budget.Clock

	mu     sync.Mutex
	quotas map[string]*quota
}

func newKeyedCore(m model.TokenBucket, maxKeys int, clock budget.Clock) keyedCore {
	newTokens(m) // validates
	if m.RefillPerSecond != 0 {
		panic("escapes: keyed budgets hold buckets without refill (a full one is then a new one)")
	}
	if maxKeys < 1 {
		panic("escapes: maxKeys must be at least 1")
	}
	if clock == nil {
		panic("escapes: nil clock")
	}
	return keyedCore{m: m, max: maxKeys, clock: clock, quotas: make(map[string]*quota)}
}

// victim returns the key of the least recently used quota that may be
// dropped, or "" if none may. k.mu must be held.
func (k *keyedCore) victim(mayDrop func(*quota) bool) (string, bool) {
	var best string
	var bestUsed int64
	found := false
	for key, q := range k.quotas {
		used := q.lastUsed.Load()
		if found && (used > bestUsed || used == bestUsed && key > best) {
			continue
		}
		if mayDrop(q) {
			best, bestUsed, found = key, used, true
		}
	}
	return best, found
}

func (k *keyedCore) newQuota() *quota {
	q := &quota{t: newTokens(k.m)}
	q.lastUsed.Store(math.MinInt64) // not used yet
	return q
}

// ---------------------------------------------------------------------------
// EvictFullQuota: the mutant.

// EvictFullQuota holds a token bucket per key, at most maxKeys of them. To
// make room for a new key it drops the least recently used quota that is
// full, since a full quota is the same as a new one; if none is full it
// holds one key more than the bound. The map lock is held only to find or
// make a key's quota: a call then records the use (a clock reading) and
// charges the quota under the quota's own lock, so calls on different keys
// never wait for each other.
//
// BUG (deliberate): a call that has taken a quota from the map and not yet
// charged it does not keep it in the map. If another call drops that quota
// in between (it was full, so it looked safe to drop), the charge lands on
// a quota no longer in the map, and the key's next call gets a new, full
// one: the charge is lost, and the key grants one retry too many. One key's
// answers are exactly its model's in any sequential use, and under
// concurrency whenever no drop falls inside another call on the same key.
type EvictFullQuota struct{ keyedCore }

// NewEvictFullQuota returns an empty EvictFullQuota: one bucket following m
// per key, at most maxKeys keys (while some is full), recency from clock.
func NewEvictFullQuota(m model.TokenBucket, maxKeys int, clock budget.Clock) *EvictFullQuota {
	return &EvictFullQuota{newKeyedCore(m, maxKeys, clock)}
}

func (k *EvictFullQuota) get(key string) *quota {
	k.mu.Lock()
	q := k.quotas[key]
	if q == nil {
		if len(k.quotas) >= k.max {
			if v, ok := k.victim((*quota).isFull); ok {
				delete(k.quotas, v)
			}
		}
		q = k.newQuota()
		k.quotas[key] = q
	}
	k.mu.Unlock()
	q.lastUsed.Store(int64(k.clock.Now()))
	return q
}

func (k *EvictFullQuota) do(key string, also []string, op actorOp, kind budget.Kind) bool {
	for _, other := range also {
		k.get(other).apply(opRequest, budget.FirstAttempt)
	}
	return k.get(key).apply(op, kind)
}

// Budget returns the budget of one key: a view that follows the model on
// its own.
func (k *EvictFullQuota) Budget(key string) budget.Budget { return &evictView{k: k, key: key} }

// Len returns the number of keys held.
func (k *EvictFullQuota) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.quotas)
}

type evictView struct {
	k    *EvictFullQuota
	key  string
	also []string
}

func (v *evictView) Request()                    { v.k.do(v.key, v.also, opRequest, budget.FirstAttempt) }
func (v *evictView) Retry(kind budget.Kind) bool { return v.k.do(v.key, v.also, opRetry, kind) }
func (v *evictView) Success(kind budget.Kind)    { v.k.do(v.key, v.also, opSuccess, kind) }

// NewEvictFullQuotaView returns the budget of key "a" of an EvictFullQuota
// following EvictFullQuotaModel with a bound of 2 keys, each of whose calls
// first touches keys "b" and "c" (see KeyedViewKeys): every call drops a
// key, often "a", in ordinary use.
func NewEvictFullQuotaView(clock budget.Clock) budget.Budget {
	k := NewEvictFullQuota(EvictFullQuotaModel, 2, clock)
	return &evictView{k: k, key: KeyedViewKeys[0], also: KeyedViewKeys[1:]}
}

// ---------------------------------------------------------------------------
// SafeKeyed: the twin.

// SafeKeyed is EvictFullQuota with drops made safe: a call pins its quota
// under the map lock before it lets go of the lock, and unpins it when it
// has charged it, and a quota is dropped only when it is full and no call
// has it pinned. Since a pin is only taken under the map lock, a quota
// found unpinned and full there cannot be charged after it is dropped, and
// dropping it loses nothing. One key's view follows SafeKeyedModel (or the
// model.TokenBucket it is built with) exactly, under any concurrency and
// whatever the other keys do. maxKeys is a soft bound: when every quota is
// pinned or not full, a new key is held beside them.
type SafeKeyed struct{ keyedCore }

// NewSafeKeyed returns an empty SafeKeyed: one bucket following m per key,
// at most maxKeys keys (while some is full and idle), recency from clock.
func NewSafeKeyed(m model.TokenBucket, maxKeys int, clock budget.Clock) *SafeKeyed {
	return &SafeKeyed{newKeyedCore(m, maxKeys, clock)}
}

func (k *SafeKeyed) acquire(key string) *quota {
	k.mu.Lock()
	q := k.quotas[key]
	if q == nil {
		if len(k.quotas) >= k.max {
			if v, ok := k.victim(func(q *quota) bool { return q.pins.Load() == 0 && q.isFull() }); ok {
				delete(k.quotas, v)
			}
		}
		q = k.newQuota()
		k.quotas[key] = q
	}
	q.pins.Add(1)
	k.mu.Unlock()
	q.lastUsed.Store(int64(k.clock.Now()))
	return q
}

func (k *SafeKeyed) do(key string, also []string, op actorOp, kind budget.Kind) bool {
	for _, other := range also {
		q := k.acquire(other)
		q.apply(opRequest, budget.FirstAttempt)
		q.pins.Add(-1)
	}
	q := k.acquire(key)
	defer q.pins.Add(-1)
	return q.apply(op, kind)
}

// Budget returns the budget of one key: a view that follows the model on
// its own.
func (k *SafeKeyed) Budget(key string) budget.Budget { return &safeView{k: k, key: key} }

// Len returns the number of keys held.
func (k *SafeKeyed) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.quotas)
}

type safeView struct {
	k    *SafeKeyed
	key  string
	also []string
}

func (v *safeView) Request()                    { v.k.do(v.key, v.also, opRequest, budget.FirstAttempt) }
func (v *safeView) Retry(kind budget.Kind) bool { return v.k.do(v.key, v.also, opRetry, kind) }
func (v *safeView) Success(kind budget.Kind)    { v.k.do(v.key, v.also, opSuccess, kind) }

// NewSafeKeyedView returns the budget of key "a" of a SafeKeyed following
// SafeKeyedModel with a bound of 2 keys, each of whose calls first touches
// keys "b" and "c" (see KeyedViewKeys).
func NewSafeKeyedView(clock budget.Clock) budget.Budget {
	k := NewSafeKeyed(SafeKeyedModel, 2, clock)
	return &safeView{k: k, key: KeyedViewKeys[0], also: KeyedViewKeys[1:]}
}

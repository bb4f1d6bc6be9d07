package budget

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxKeys is the bound on a Keyed's keys when MaxKeys is zero.
const DefaultMaxKeys = 1024

// KeyedConfig configures a [Keyed].
type KeyedConfig[K comparable, B Budget] struct {
	// New builds the budget of a key, on the key's first use and again
	// after the key was dropped. It is required. Goroutines that miss the
	// same key at once may each call it; all but one of the budgets built
	// are dropped unused, so New should only build. An error fails that
	// Get and holds nothing.
	New func(key K) (B, error)
	// MaxKeys bounds the keys held; zero means DefaultMaxKeys. To make
	// room for a new key, Keyed drops one by the second-chance ("clock")
	// approximation of least recently used: the hand passes over, once,
	// a key used again since it was added or the hand last passed.
	MaxKeys int
	// IdleTimeout, if positive, drops a key not used for that long. Keys
	// are swept when another key is missed, at most once per quarter of
	// IdleTimeout, so a key may outlive its timeout by a quarter of it,
	// or for as long as no key is missed (when nothing new is held either).
	IdleTimeout time.Duration
	// Clock times IdleTimeout; nil means NewMonotonicClock. Without
	// IdleTimeout, no Get reads it.
	Clock Clock
	// OnDrop, if set, is called with each key dropped and its budget, on
	// the goroutine of the Get that dropped it, after Keyed's lock is
	// released: to unregister its metrics, say.
	OnDrop func(key K, b B)
}

// A Keyed holds one budget per key: a host, a destination service, a
// tenant. Envoy keeps a budget per cluster and Gateway API (GEP-3388) one
// per destination, so that one failing dependency spends its own budget
// and not the others'. A key's budget is built from the config on first
// use; memory is bounded by MaxKeys and, optionally, IdleTimeout.
//
// A key that is dropped loses its state: its next Get builds a new budget,
// full or empty as New makes it. So that a dropped key does not forget
// work still in flight, Keyed does not drop a key whose budget reports
// calls or retries in flight (an InFlight() (calls, retries int) method,
// as [InFlight] has) while it can drop another.
//
// Getting a key already held takes no lock and allocates nothing. It
// writes only the key's own marks, and only when they change: its used
// mark once per turn of the clock hand and, with IdleTimeout, its time of
// last use once per sixteenth of the timeout (reading the Clock on every
// Get).
// Most callers want [Keyed.Get].
//
// Keyed is safe for concurrent use by multiple goroutines.
type Keyed[K comparable, B Budget] struct {
	cfg   KeyedConfig[K, B]
	max   int
	clock Clock

	// index maps each key held to its *keyedEntry. A sync.Map's loads
	// write nothing shared, so hits on many goroutines do not contend.
	index sync.Map

	mu    sync.Mutex          // guards what follows, and changes to index
	ring  []*keyedEntry[K, B] // the keys held; the clock hand sweeps it
	hand  int
	swept time.Duration // when the idle keys were last swept
	ready bool          // built by NewKeyed
}

type keyedEntry[K comparable, B Budget] struct {
	key  K
	b    B
	used atomic.Bool  // used since the hand last passed
	last atomic.Int64 // the Clock reading of the latest use, with IdleTimeout
}

// NewKeyed returns an empty Keyed, or an error wrapping [ErrInvalidConfig].
func NewKeyed[K comparable, B Budget](c KeyedConfig[K, B]) (*Keyed[K, B], error) {
	if c.New == nil {
		return nil, configError("KeyedConfig.New", "nil", "a function")
	}
	if c.MaxKeys < 0 {
		return nil, configError("KeyedConfig.MaxKeys", c.MaxKeys, ">= 0")
	}
	if c.IdleTimeout < 0 {
		return nil, configError("KeyedConfig.IdleTimeout", c.IdleTimeout, ">= 0")
	}
	k := &Keyed[K, B]{cfg: c, max: c.MaxKeys, clock: c.Clock, ready: true}
	if k.max == 0 {
		k.max = DefaultMaxKeys
	}
	if c.IdleTimeout > 0 {
		if k.clock == nil {
			k.clock = NewMonotonicClock()
		}
		k.swept = k.clock.Now()
	}
	return k, nil
}

// errNilKeyed is returned by a Get on a nil or zero Keyed.
var errNilKeyed = errors.New("budget: Keyed used without NewKeyed")

// Get returns the budget of key, building it with New if key is not held,
// and dropping keys as MaxKeys and IdleTimeout say to make room.
func (k *Keyed[K, B]) Get(key K) (B, error) {
	if k == nil || !k.ready {
		var zero B
		return zero, errNilKeyed
	}
	if v, ok := k.index.Load(key); ok {
		e := v.(*keyedEntry[K, B])
		k.touch(e)
		return e.b, nil
	}
	return k.miss(key)
}

// touch marks e used, writing only what changed, so that hits on a hot key
// from many goroutines do not fight over its cache line.
func (k *Keyed[K, B]) touch(e *keyedEntry[K, B]) {
	if !e.used.Load() {
		e.used.Store(true)
	}
	if k.cfg.IdleTimeout > 0 {
		now := int64(k.clock.Now())
		// A use is recorded to within 1/16 of the timeout.
		if now-e.last.Load() >= int64(k.cfg.IdleTimeout)/16 {
			e.last.Store(now)
		}
	}
}

// miss builds key's budget, outside the lock, and holds it unless another
// goroutine got there first.
func (k *Keyed[K, B]) miss(key K) (B, error) {
	b, err := k.cfg.New(key)
	if err != nil {
		var zero B
		return zero, err
	}
	k.mu.Lock()
	if v, ok := k.index.Load(key); ok {
		k.mu.Unlock()
		e := v.(*keyedEntry[K, B])
		k.touch(e)
		return e.b, nil
	}
	var dropped []*keyedEntry[K, B]
	if k.cfg.IdleTimeout > 0 {
		dropped = k.sweepIdle(dropped)
	}
	for len(k.ring) >= k.max {
		dropped = append(dropped, k.evict())
	}
	// A new key starts unmarked: one that is not used again is the first
	// to go, and a key in steady use outlives any number of keys used once.
	e := &keyedEntry[K, B]{key: key, b: b}
	if k.cfg.IdleTimeout > 0 {
		e.last.Store(int64(k.clock.Now()))
	}
	k.index.Store(key, e)
	k.ring = append(k.ring, e)
	k.mu.Unlock()
	if k.cfg.OnDrop != nil {
		for _, d := range dropped {
			k.cfg.OnDrop(d.key, d.b)
		}
	}
	return b, nil
}

// busy reports whether e's budget has calls or retries in flight. A retry
// counts on its own: a caller that asks for retries without a Request
// holds retries with no call, and dropping the key forgot them.
func busy[K comparable, B Budget](e *keyedEntry[K, B]) bool {
	f, ok := any(e.b).(interface{ InFlight() (calls, retries int) })
	if !ok {
		return false
	}
	calls, retries := f.InFlight()
	return calls > 0 || retries > 0
}

// sweepIdle drops, at most once per quarter of IdleTimeout, every key idle
// for IdleTimeout that is not busy. k.mu must be held.
func (k *Keyed[K, B]) sweepIdle(dropped []*keyedEntry[K, B]) []*keyedEntry[K, B] {
	now := k.clock.Now()
	if now-k.swept < k.cfg.IdleTimeout/4 {
		return dropped
	}
	k.swept = now
	for i := 0; i < len(k.ring); {
		e := k.ring[i]
		if int64(now)-e.last.Load() >= int64(k.cfg.IdleTimeout) && !busy(e) {
			k.remove(i)
			dropped = append(dropped, e)
			continue
		}
		i++
	}
	return dropped
}

// evict drops one key by the second-chance rule, passing over busy keys
// while another can go, and returns it. k.mu must be held, with at least
// one key held.
func (k *Keyed[K, B]) evict() *keyedEntry[K, B] {
	// Two turns of the hand clear every used mark; a third finds a key
	// that is not busy, if there is one.
	for range 3 * len(k.ring) {
		if k.hand >= len(k.ring) {
			k.hand = 0
		}
		e := k.ring[k.hand]
		if e.used.Swap(false) || busy(e) {
			k.hand++
			continue
		}
		k.remove(k.hand)
		return e
	}
	if k.hand >= len(k.ring) {
		k.hand = 0
	}
	e := k.ring[k.hand] // every key is busy: the bound holds all the same
	k.remove(k.hand)
	return e
}

// remove drops the key at ring index i. k.mu must be held.
func (k *Keyed[K, B]) remove(i int) {
	e := k.ring[i]
	last := len(k.ring) - 1
	k.ring[i] = k.ring[last]
	k.ring[last] = nil
	k.ring = k.ring[:last]
	k.index.Delete(e.key)
}

// Len returns the number of keys held.
func (k *Keyed[K, B]) Len() int {
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.ring)
}

// Range calls f with each key held and its budget, in no order, until f
// returns false: to export every key's metrics, say. It holds the lock
// that a Get of a key not held takes, so f must not call Get.
func (k *Keyed[K, B]) Range(f func(key K, b B) bool) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, e := range k.ring {
		if !f(e.key, e.b) {
			return
		}
	}
}

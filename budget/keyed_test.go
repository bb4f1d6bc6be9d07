package budget_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

func newKeyedBuckets(t *testing.T, c budget.KeyedConfig[string, *budget.TokenBucket]) *budget.Keyed[string, *budget.TokenBucket] {
	t.Helper()
	if c.New == nil {
		c.New = func(string) (*budget.TokenBucket, error) {
			return budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 2, TransientCost: 1, ThrottledCost: 1})
		}
	}
	k, err := budget.NewKeyed(c)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func get[K comparable, B budget.Budget](t *testing.T, k *budget.Keyed[K, B], key K) B {
	t.Helper()
	b, err := k.Get(key)
	if err != nil {
		t.Fatalf("Get(%v): %v", key, err)
	}
	return b
}

// Each key has a budget of its own: draining one leaves the others full,
// and a key held returns the same budget every time.
func TestKeyedKeysDoNotShareState(t *testing.T) {
	k := newKeyedBuckets(t, budget.KeyedConfig[string, *budget.TokenBucket]{})
	a, b := get(t, k, "a.example"), get(t, k, "b.example")
	if a == b {
		t.Fatal("two keys share one budget")
	}
	for a.Retry(budget.Transient) {
	}
	if !b.Retry(budget.Transient) || b.Available() != 1 {
		t.Errorf("after a.example drained its budget, b.example's holds %v and denies", b.Available())
	}
	if get(t, k, "a.example") != a || get(t, k, "b.example") != b {
		t.Error("Get of a key held returned another budget")
	}
	if a.Available() != 0 || k.Len() != 2 {
		t.Errorf("a.example holds %v, want 0; %d keys, want 2", a.Available(), k.Len())
	}
}

// MaxKeys bounds the keys, and a key in steady use outlives any number of
// keys used once.
func TestKeyedMaxKeys(t *testing.T) {
	var dropped []string
	k := newKeyedBuckets(t, budget.KeyedConfig[string, *budget.TokenBucket]{
		MaxKeys: 8,
		OnDrop:  func(key string, _ *budget.TokenBucket) { dropped = append(dropped, key) },
	})
	hot := get(t, k, "hot")
	for i := range 1000 {
		if get(t, k, "hot") != hot {
			t.Fatalf("after %d cold keys, the hot key was dropped", i)
		}
		get(t, k, fmt.Sprint("cold", i))
		if n := k.Len(); n > 8 {
			t.Fatalf("%d keys held, MaxKeys is 8", n)
		}
	}
	if len(dropped) != 1001-8 {
		t.Errorf("%d keys dropped, want %d", len(dropped), 1001-8)
	}
	for _, d := range dropped {
		if d == "hot" {
			t.Error("OnDrop was told of the hot key")
		}
	}
}

// A key idle for IdleTimeout is dropped at a later miss, and its next Get
// builds a new budget.
func TestKeyedIdleTimeout(t *testing.T) {
	clock := new(budget.ManualClock)
	var dropped []string
	k := newKeyedBuckets(t, budget.KeyedConfig[string, *budget.TokenBucket]{
		IdleTimeout: time.Minute, Clock: clock,
		OnDrop: func(key string, _ *budget.TokenBucket) { dropped = append(dropped, key) },
	})
	idle, busy := get(t, k, "idle"), get(t, k, "busy")
	idle.Retry(budget.Transient)
	for range 4 {
		clock.Advance(20 * time.Second)
		get(t, k, "busy")
	}
	get(t, k, "new") // a miss: the sweep
	if k.Len() != 2 || len(dropped) != 1 || dropped[0] != "idle" {
		t.Fatalf("after 80s, %d keys held and %q dropped; want busy and new held, idle dropped", k.Len(), dropped)
	}
	if again := get(t, k, "idle"); again == idle || again.Available() != 2 {
		t.Errorf("the idle key came back with its old budget (or not full: %v)", again.Available())
	}
	if get(t, k, "busy") != busy {
		t.Error("a key in use was dropped")
	}
}

// A budget with calls in flight is not dropped while another key can be.
func TestKeyedKeepsWorkInFlight(t *testing.T) {
	k, err := budget.NewKeyed(budget.KeyedConfig[string, *budget.InFlight]{
		MaxKeys: 2,
		New:     func(string) (*budget.InFlight, error) { return budget.NewInFlight(budget.DefaultInFlightConfig()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	a := get(t, k, "a")
	a.Request() // a call in flight
	get(t, k, "b")
	get(t, k, "c") // drops b, not a
	if get(t, k, "a") != a {
		t.Fatal("the key with a call in flight was dropped")
	}
	if calls, _ := a.InFlight(); calls != 1 {
		t.Errorf("%d calls in flight, want 1", calls)
	}
	a.CallEnd()
}

// A granted retry with no call in flight (a caller that retries without
// Request) keeps its key too: dropping it forgot the retry.
func TestKeyedKeepsRetriesInFlight(t *testing.T) {
	k, err := budget.NewKeyed(budget.KeyedConfig[string, *budget.InFlight]{
		MaxKeys: 2,
		New:     func(string) (*budget.InFlight, error) { return budget.NewInFlight(budget.DefaultInFlightConfig()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	a := get(t, k, "a")
	if !a.Retry(budget.Transient) {
		t.Fatal("the first retry was denied")
	}
	get(t, k, "b")
	get(t, k, "c") // drops b, not a
	if get(t, k, "a") != a {
		t.Fatal("the key with a retry in flight was dropped")
	}
	if _, retries := a.InFlight(); retries != 1 {
		t.Errorf("%d retries in flight, want 1", retries)
	}
}

func TestKeyedErrors(t *testing.T) {
	if _, err := budget.NewKeyed(budget.KeyedConfig[string, budget.Budget]{}); !errors.Is(err, budget.ErrInvalidConfig) {
		t.Errorf("NewKeyed with no New: %v, want ErrInvalidConfig", err)
	}
	newTB := func(string) (*budget.TokenBucket, error) {
		return budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	}
	for _, c := range []budget.KeyedConfig[string, *budget.TokenBucket]{{New: newTB, MaxKeys: -1}, {New: newTB, IdleTimeout: -time.Second}} {
		if _, err := budget.NewKeyed(c); !errors.Is(err, budget.ErrInvalidConfig) {
			t.Errorf("NewKeyed(%+v): %v, want ErrInvalidConfig", c, err)
		}
	}
	boom := errors.New("no such tenant")
	k, _ := budget.NewKeyed(budget.KeyedConfig[string, *budget.TokenBucket]{New: func(string) (*budget.TokenBucket, error) { return nil, boom }})
	if _, err := k.Get("x"); !errors.Is(err, boom) || k.Len() != 0 {
		t.Errorf("Get when New fails: %v with %d keys held; want New's error and nothing held", err, k.Len())
	}
	var zero *budget.Keyed[string, *budget.TokenBucket]
	if _, err := zero.Get("x"); err == nil {
		t.Error("Get on a nil Keyed returned no error")
	}
	if _, err := new(budget.Keyed[string, *budget.TokenBucket]).Get("x"); err == nil {
		t.Error("Get on a zero Keyed returned no error")
	}
}

// Getting a key already held allocates nothing, with IdleTimeout too.
func TestKeyedHitDoesNotAllocate(t *testing.T) {
	for _, idle := range []time.Duration{0, time.Minute} {
		k := newKeyedBuckets(t, budget.KeyedConfig[string, *budget.TokenBucket]{IdleTimeout: idle})
		key := "api.example.com"
		get(t, k, key)
		if n := testing.AllocsPerRun(1000, func() { _, _ = k.Get(key) }); n != 0 {
			t.Errorf("IdleTimeout %v: a hit allocates %v times, want 0", idle, n)
		}
	}
}

// Under concurrent use with a small bound and churn, every key's Get
// returns one budget while the key is held, and the bound holds.
func TestKeyedConcurrent(t *testing.T) {
	var mu sync.Mutex
	built := map[*budget.TokenBucket]string{}
	k := newKeyedBuckets(t, budget.KeyedConfig[string, *budget.TokenBucket]{
		MaxKeys: 16,
		New: func(key string) (*budget.TokenBucket, error) {
			b, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
			mu.Lock()
			built[b] = key
			mu.Unlock()
			return b, err
		},
	})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 5000 {
				key := fmt.Sprint("k", r.IntN(40))
				b, err := k.Get(key)
				if err != nil {
					t.Errorf("Get: %v", err)
					return
				}
				mu.Lock()
				owner := built[b]
				mu.Unlock()
				if owner != key {
					t.Errorf("Get(%q) returned the budget built for %q", key, owner)
					return
				}
				b.Retry(budget.Transient)
				b.Success(budget.Transient)
				if n := k.Len(); n > 16 {
					t.Errorf("%d keys held, MaxKeys is 16", n)
					return
				}
			}
		})
	}
	wg.Wait()
	n := 0
	k.Range(func(string, *budget.TokenBucket) bool { n++; return true })
	if n != k.Len() {
		t.Errorf("Range saw %d keys, Len says %d", n, k.Len())
	}
}

// A key idle for exactly IdleTimeout is dropped at the next miss: the
// timeout is when it goes, not an instant after.
func TestKeyedIdleTimeoutIsInclusive(t *testing.T) {
	clock := new(budget.ManualClock)
	var dropped []string
	k := newKeyedBuckets(t, budget.KeyedConfig[string, *budget.TokenBucket]{
		IdleTimeout: time.Minute, Clock: clock,
		OnDrop: func(key string, _ *budget.TokenBucket) { dropped = append(dropped, key) },
	})
	get(t, k, "idle")
	clock.Advance(time.Minute)
	get(t, k, "new") // a miss: the sweep
	if len(dropped) != 1 || dropped[0] != "idle" {
		t.Errorf("a key idle for exactly IdleTimeout: dropped %q; want idle dropped", dropped)
	}
}

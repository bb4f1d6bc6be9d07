package redisbudget_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/race"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/redisbudget"
)

var (
	scenarios = flag.Int("redis.scenarios", 5, "scenarios per fault kind in TestLinearizableUnderFaults (the acceptance level is 50)")
	names     atomic.Int64
)

// fresh returns a budget name no other test has used.
func fresh(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), names.Add(1))
}

// The Lua scripts follow the models exactly, one call at a time, on an
// injected clock.
func TestTokenBucketMatchesModel(t *testing.T) {
	if race.Enabled {
		// One goroutine calls the budget: the race detector has nothing
		// to order, and go test ./... without it (CI runs both) keeps
		// the verdict; the concurrent tests here still run under it.
		t.Skip("a sequential check: run without -race")
	}
	s := startServer(t)
	client := s.client(t)
	rapid.Check(t, func(rt *rapid.T) {
		m := seqcheck.DrawTokenBucket(rt, true)
		tm := seqcheck.TokenBucketTiming(m)
		tm.Forward = true // instants stay far below 2^53 ns
		name := fresh("tb")
		seqcheck.Check(rt, seqcheck.Subject[model.TokenBucketState]{
			Model: m,
			New: func(c budget.Clock) budget.Budget {
				b, err := redisbudget.NewTokenBucket(redisbudget.Config{Client: client, Name: name, Clock: c, CallTimeout: time.Second}, seqcheck.TokenBucketConfig(m, nil))
				if err != nil {
					rt.Fatal(err)
				}
				return failOnError{b, rt}
			},
			Timing: tm,
		}, nil)
	})
}

func TestRatioMatchesModel(t *testing.T) {
	if race.Enabled {
		// One goroutine calls the budget: the race detector has nothing
		// to order, and go test ./... without it (CI runs both) keeps
		// the verdict; the concurrent tests here still run under it.
		t.Skip("a sequential check: run without -race")
	}
	s := startServer(t)
	client := s.client(t)
	rapid.Check(t, func(rt *rapid.T) {
		m := seqcheck.DrawRatio(rt)
		if m.Slots > 64 {
			m.Slots = 64 // fewer slots: each expired slot is a call inside the script
		}
		if m.Window < time.Duration(m.Slots) {
			m.Window = time.Duration(m.Slots)
		}
		tm := seqcheck.RatioTiming(m)
		tm.Forward = true
		name := fresh("ratio")
		seqcheck.Check(rt, seqcheck.Subject[model.RatioState]{
			Model: m,
			New: func(c budget.Clock) budget.Budget {
				b, err := redisbudget.NewRatio(redisbudget.Config{Client: client, Name: name, Clock: c, CallTimeout: time.Second}, seqcheck.RatioConfig(m, nil))
				if err != nil {
					rt.Fatal(err)
				}
				return failOnError{b, rt}
			},
			Timing: tm,
		}, nil)
	})
}

// failOnError fails the check when a call to a healthy server fails.
type failOnError struct {
	b interface {
		budget.Budget
		Errors() uint64
	}
	t *rapid.T
}

func (f failOnError) check() {
	if n := f.b.Errors(); n > 0 {
		f.t.Fatalf("%d calls to a healthy server failed", n)
	}
}
func (f failOnError) Request()                 { f.b.Request(); f.check() }
func (f failOnError) Retry(k budget.Kind) bool { ok := f.b.Retry(k); f.check(); return ok }
func (f failOnError) Success(k budget.Kind)    { f.b.Success(k); f.check() }

// Available reads the shared balance, so that the sequential check compares
// AvailableContext with the model's balance after every operation.
func (f failOnError) Available() float64 {
	v, err := f.b.(budget.ContextBalancer).AvailableContext(context.Background())
	if err != nil {
		f.t.Fatalf("AvailableContext on a healthy server: %v", err)
	}
	return v
}

// A call gives up at its timeout while the server is stopped, and the
// retry is denied and reported. The client's own timeouts are 5 s, so a
// call that the budget's CallTimeout (100ms) or the caller's context did
// not bound would take 5 s: the bound of 1 s tells the two apart however
// busy the machine is, where one of the timeout plus 50ms once failed.
func TestCallsReturnWhileTheServerIsStopped(t *testing.T) {
	s := startServer(t)
	client := redis.NewClient(&redis.Options{
		Addr: s.addr(), MaxRetries: -1, PoolSize: 4,
		DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { client.Close() })
	var reported atomic.Int64
	cfg := redisbudget.Config{Client: client, Name: fresh("stopped"), CallTimeout: 100 * time.Millisecond,
		OnError: func(error) { reported.Add(1) }}
	b, err := redisbudget.NewTokenBucket(cfg, budget.DefaultTokenBucketConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !b.Retry(budget.Transient) {
		t.Fatal("a retry on a healthy server was denied")
	}
	s.pause()
	defer s.resume()
	var worst time.Duration
	for range 10 {
		start := time.Now()
		ok, err := b.RetryContext(context.Background(), budget.Transient)
		d := time.Since(start)
		worst = max(worst, d)
		if ok || !errors.Is(err, redisbudget.ErrUnavailable) {
			t.Errorf("RetryContext on a stopped server = %v, %v; want false and ErrUnavailable", ok, err)
		}
	}
	t.Logf("slowest call while stopped: %v (timeout 100ms)", worst)
	if worst > time.Second {
		t.Errorf("a call took %v while the server was stopped; want it bounded by the timeout (100ms), not the client's 5 s", worst)
	}
	if b.Errors() != 10 || reported.Load() != 10 {
		t.Errorf("Errors() = %d, OnError called %d times; want 10 and 10", b.Errors(), reported.Load())
	}
	// The caller's context bounds a call too.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if ok, _ := b.RetryContext(ctx, budget.Transient); ok || time.Since(start) > time.Second {
		t.Errorf("RetryContext with a 20ms context took %v (granted %v)", time.Since(start), ok)
	}
}

// With FleetSize set, a failed call falls back to a local budget with a
// fleet member's share of the capacity, never to a full one.
func TestFallbackTakesAShare(t *testing.T) {
	s := startServer(t)
	cfg := redisbudget.Config{Client: s.client(t), Name: fresh("fallback"), CallTimeout: 50 * time.Millisecond, FleetSize: 10}
	b, err := redisbudget.NewTokenBucket(cfg, budget.TokenBucketConfig{Capacity: 100, TransientCost: 1, ThrottledCost: 1})
	if err != nil {
		t.Fatal(err)
	}
	s.kill()
	granted := 0
	for range 50 {
		if b.Retry(budget.Transient) {
			granted++
		}
	}
	if granted != 10 {
		t.Errorf("the fallback granted %d retries from a fleet share of 100/10; want 10", granted)
	}
}

// Every bad Config is a *budget.ConfigError that names its field, without
// a call to Redis; an IdleTTL under a second (3600 meant as seconds is
// 3.6µs, which Redis took as 0ms and expired at once) among them.
func TestConfigErrorsAreConfigErrors(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}) // never dialled
	defer client.Close()
	ok := redisbudget.Config{Client: client, Name: "x"}
	for _, tc := range []struct {
		field string
		edit  func(*redisbudget.Config)
	}{
		{"Client", func(c *redisbudget.Config) { c.Client = nil }},
		{"Name", func(c *redisbudget.Config) { c.Name = "" }},
		{"CallTimeout", func(c *redisbudget.Config) { c.CallTimeout = -time.Second }},
		{"IdleTTL", func(c *redisbudget.Config) { c.IdleTTL = -time.Second }},
		{"IdleTTL", func(c *redisbudget.Config) { c.IdleTTL = 3600 }},
		{"IdleTTL", func(c *redisbudget.Config) { c.IdleTTL = 999 * time.Millisecond }},
		{"FleetSize", func(c *redisbudget.Config) { c.FleetSize = -1 }},
		// Clients that resend a command whose reply was lost, which would
		// apply a script twice.
		{"Client", func(c *redisbudget.Config) {
			c.Client = closing(t, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
		}},
		{"Client", func(c *redisbudget.Config) {
			c.Client = closing(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}))
		}},
		{"Client", func(c *redisbudget.Config) {
			c.Client = closing(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRedirects: -1, MaxRetries: 2}))
		}},
		// On a cluster, a ClockKey outside the budget's slot.
		{"ClockKey", func(c *redisbudget.Config) {
			c.Client = closing(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRedirects: -1}))
			c.ClockKey = "clock"
		}},
	} {
		c := ok
		tc.edit(&c)
		for name, err := range map[string]error{
			"NewTokenBucket": second(redisbudget.NewTokenBucket(c, budget.DefaultTokenBucketConfig())),
			"NewRatio":       second(redisbudget.NewRatio(c, budget.DefaultRatioConfig())),
		} {
			var ce *budget.ConfigError
			if !errors.As(err, &ce) || ce.Field != "redisbudget.Config."+tc.field || !errors.Is(err, budget.ErrInvalidConfig) {
				t.Errorf("%s with a bad %s: %v, want a *budget.ConfigError for redisbudget.Config.%s", name, tc.field, err, tc.field)
			}
		}
	}
	big := budget.DefaultTokenBucketConfig()
	big.Capacity = 10_000
	var ce *budget.ConfigError
	if _, err := redisbudget.NewTokenBucket(ok, big); !errors.As(err, &ce) || ce.Field != "TokenBucketConfig.Capacity" {
		t.Errorf("capacity 10000: %v, want a *budget.ConfigError", err)
	}
	slots := budget.DefaultRatioConfig()
	slots.Slots = 2000
	if _, err := redisbudget.NewRatio(ok, slots); !errors.As(err, &ce) || ce.Field != "RatioConfig.Slots" {
		t.Errorf("2000 slots: %v, want a *budget.ConfigError", err)
	}
}

func second[T any](_ T, err error) error { return err }

// closing closes c at the end of the test.
func closing[C interface{ Close() error }](t *testing.T, c C) C {
	t.Cleanup(func() { c.Close() })
	return c
}

// A cluster client that resends nothing, with a ClockKey in the budget's
// slot, is a good Config.
func TestClusterConfig(t *testing.T) {
	c := closing(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRedirects: -1}))
	cfg := redisbudget.Config{Client: c, Name: "payments", ClockKey: "retrybudget:{payments}:clock"}
	if _, err := redisbudget.NewTokenBucket(cfg, budget.DefaultTokenBucketConfig()); err != nil {
		t.Error(err)
	}
	if _, err := redisbudget.NewRatio(cfg, budget.DefaultRatioConfig()); err != nil {
		t.Error(err)
	}
}

// The fallback never grants more than a process's share, even when the
// share is below a retry's cost: with a capacity of 500 and a fleet of 36
// the share is 13.9, under a transient retry's 14, and with 1000 processes
// it is 0.5. It used to grant at least one retry of every kind.
func TestFallbackNeverExceedsTheShare(t *testing.T) {
	s := startServer(t)
	cfg := budget.TokenBucketConfig{Capacity: 500, TransientCost: 14, ThrottledCost: 5}
	fleets := map[int][2]int{36: {0, 2}, 1000: {0, 0}} // fleet size: transient and throttled grants
	var buckets = map[int]*redisbudget.TokenBucket{}
	for fleet := range fleets {
		b, err := redisbudget.NewTokenBucket(redisbudget.Config{Client: s.client(t), Name: fresh("share"), CallTimeout: 50 * time.Millisecond, FleetSize: fleet}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		buckets[fleet] = b
	}
	s.kill()
	for fleet, want := range fleets {
		b := buckets[fleet]
		var got [2]int
		for range 20 {
			if b.Retry(budget.Transient) {
				got[0]++
			}
		}
		for range 20 {
			if b.Retry(budget.Throttled) {
				got[1]++
			}
		}
		if got != want {
			t.Errorf("fleet of %d (share %.1f tokens): the fallback granted %d transient retries (cost 14) and %d throttled (cost 5); want %d and %d",
				fleet, 500/float64(fleet), got[0], got[1], want[0], want[1])
		}
	}
}

// A call that Redis refuses for the state it finds is ErrCorrupt, not
// ErrUnavailable, with Redis's answer in the chain: a budget key of
// another type, and a ClockKey that is missing or holds no number (a
// missing one used to read as 0, freezing the clock).
func TestCorruptStateIsNotUnavailable(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	clock := fresh("clock")
	for _, tc := range []struct {
		name, want string
		setup      func(name string) error
		clockKey   string
	}{
		{"the clock key missing", "does not exist", func(string) error { return nil }, fresh("noclock")},
		{"the clock key holding banana", "banana", func(string) error { return c.Set(ctx, clock, "banana", 0).Err() }, clock},
		{"the budget's key a list", "WRONGTYPE", func(name string) error {
			if err := c.RPush(ctx, "retrybudget:{"+name+"}:tb", "x").Err(); err != nil {
				return err
			}
			return c.RPush(ctx, "retrybudget:{"+name+"}:ratio", "x").Err()
		}, ""},
	} {
		name := fresh("corrupt")
		if err := tc.setup(name); err != nil {
			t.Fatal(err)
		}
		cfg := redisbudget.Config{Client: c, Name: name, ClockKey: tc.clockKey}
		tb, err := redisbudget.NewTokenBucket(cfg, budget.DefaultTokenBucketConfig())
		if err != nil {
			t.Fatal(err)
		}
		ra, err := redisbudget.NewRatio(cfg, budget.DefaultRatioConfig())
		if err != nil {
			t.Fatal(err)
		}
		for budgetName, retry := range map[string]func(context.Context, budget.Kind) (bool, error){"TokenBucket": tb.RetryContext, "Ratio": ra.RetryContext} {
			ok, err := retry(ctx, budget.Transient)
			if ok || !errors.Is(err, redisbudget.ErrCorrupt) || errors.Is(err, redisbudget.ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s with %s: granted %v, %v; want a denial with ErrCorrupt (not ErrUnavailable) naming %q", budgetName, tc.name, ok, err, tc.want)
			}
		}
	}
}

func TestConfigErrors(t *testing.T) {
	c := redisbudget.Config{Name: "x"}
	if _, err := redisbudget.NewTokenBucket(c, budget.DefaultTokenBucketConfig()); !errors.Is(err, budget.ErrInvalidConfig) {
		t.Errorf("no client: %v", err)
	}
	c.Client = nil
	big := budget.DefaultTokenBucketConfig()
	big.Capacity = 10_000
	s := startServer(t)
	c = redisbudget.Config{Client: s.client(t), Name: "x"}
	if _, err := redisbudget.NewTokenBucket(c, big); !errors.Is(err, budget.ErrInvalidConfig) {
		t.Errorf("capacity 10000: %v", err)
	}
	if _, err := redisbudget.NewRatio(redisbudget.Config{Client: c.Client}, budget.DefaultRatioConfig()); !errors.Is(err, budget.ErrInvalidConfig) {
		t.Errorf("no name: %v", err)
	}
}

// In production the budgets read the server's TIME inside the script.
func TestServerTime(t *testing.T) {
	s := startServer(t)
	cfg := redisbudget.Config{Client: s.client(t), Name: fresh("time"), CallTimeout: time.Second}
	tb, err := redisbudget.NewTokenBucket(cfg, budget.TokenBucketConfig{Capacity: 1, TransientCost: 1, ThrottledCost: 1, RefillPerSecond: 20})
	if err != nil {
		t.Fatal(err)
	}
	if !tb.Retry(budget.Transient) || tb.Retry(budget.Transient) {
		t.Fatal("a bucket of one token did not grant exactly one retry")
	}
	time.Sleep(80 * time.Millisecond) // 20 tokens a second: at least one token back
	if !tb.Retry(budget.Transient) {
		t.Error("the server's clock refilled nothing in 80ms at 20 tokens a second")
	}
	cfg.Name = fresh("time")
	r, err := redisbudget.NewRatio(cfg, budget.RatioConfig{Ratio: 0.1, Window: 50 * time.Millisecond, Slots: 5, Floor: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Retry(budget.Transient) || r.Retry(budget.Transient) {
		t.Fatal("a window with a floor of one did not grant exactly one retry")
	}
	time.Sleep(120 * time.Millisecond) // past the window
	if !r.Retry(budget.Transient) {
		t.Error("the server's clock did not move the window on in 120ms")
	}
	if tb.Errors()+r.Errors() != 0 {
		t.Errorf("%d failed calls to a healthy server", tb.Errors()+r.Errors())
	}
}

// A Ratio key in use for months must stay exact: the script moves its
// origin before instants pass 2^52 ns and renumbers its slots before they
// pass 2^50, and neither may change an answer. Each subtest gives two keys
// the same history, ages one of them, and then asks both the same
// questions.
func TestRatioRebasesLongLivedKeys(t *testing.T) {
	s := startServer(t)
	client := s.client(t)
	rc := budget.RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Floor: 3}
	pair := func(clock budget.Clock) (*redisbudget.Ratio, *redisbudget.Ratio, string) {
		var rs [2]*redisbudget.Ratio
		var key string
		for i := range rs {
			key = fresh("aged")
			r, err := redisbudget.NewRatio(redisbudget.Config{Client: client, Name: key, Clock: clock, CallTimeout: time.Second}, rc)
			if err != nil {
				t.Fatal(err)
			}
			rs[i] = r
		}
		for _, r := range rs {
			for range 20 {
				r.Request()
			}
			if !r.Retry(budget.Transient) {
				t.Fatal("the first retry after 20 requests was denied")
			}
		}
		return rs[0], rs[1], "retrybudget:{" + key + "}:ratio"
	}

	t.Run("ServerTime", func(t *testing.T) {
		fresh, aged, key := pair(nil)
		ageRatioKey(t, client, key, rc.Slots, 60*24*time.Hour, 0)
		// 20 requests at 10% allow 2 retries, and the floor allows 3: one
		// is taken, two more are granted, and the next is denied.
		for i, w := range []bool{true, true, false} {
			if a, b := fresh.Retry(budget.Transient), aged.Retry(budget.Transient); a != w || b != w {
				t.Errorf("retry %d: fresh key %v, aged key %v, want %v", i+2, a, b, w)
			}
		}
		f := hashFields(t, client, key)
		if l := f["l"]; l <= 0 || l > 1<<52 {
			t.Errorf("the aged key's latest instant is %d ns after its origin, want it moved below 2^52", l)
		}
		if q, r := f["q"], f["r"]; q != 20 || r != 3 {
			t.Errorf("the aged key counts %d requests and %d retries, want 20 and 3", q, r)
		}
		if n := fresh.Errors() + aged.Errors(); n != 0 {
			t.Errorf("%d failed calls to a healthy server", n)
		}
	})

	// Renumbered slots must keep their ring indices, or the counts of the
	// wrong slot leave the window later: this subtest runs past several
	// windows on a manual clock.
	t.Run("Slots", func(t *testing.T) {
		clock := new(budget.ManualClock)
		clock.Set(time.Hour)
		fresh, aged, key := pair(clock)
		slots := (int64(1)<<50/int64(rc.Slots) + 1) * int64(rc.Slots)
		ageRatioKey(t, client, key, rc.Slots, 0, slots)
		sameAnswers(t, clock, rc.Window, fresh, aged)
		if h := hashFields(t, client, key)["h"]; h <= 0 || h > 1<<50 {
			t.Errorf("the aged key's head slot is %d, want it renumbered below 2^50", h)
		}
	})

	// A key written by the script before it kept the offset into the head
	// slot (field a) is read as it was meant.
	t.Run("KeyWithoutOffset", func(t *testing.T) {
		clock := new(budget.ManualClock)
		clock.Set(time.Hour + 700*time.Millisecond) // 0.7 of a slot in
		fresh, old, key := pair(clock)
		if err := client.HDel(context.Background(), key, "a").Err(); err != nil {
			t.Fatal(err)
		}
		sameAnswers(t, clock, rc.Window, fresh, old)
	})
}

// sameAnswers makes the same 2000 random calls to a and b, with steps of a
// manual clock up to half a window, and fails at the first retry they
// answer differently.
func sameAnswers(t *testing.T, clock *budget.ManualClock, window time.Duration, a, b *redisbudget.Ratio) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	var granted, denied int
	for i := range 2000 {
		switch n := rng.IntN(10); {
		case n < 5:
			a.Request()
			b.Request()
		case n < 9:
			x, y := a.Retry(budget.Transient), b.Retry(budget.Transient)
			if x != y {
				t.Fatalf("call %d at %v: fresh key %v, other key %v", i, clock.Now(), x, y)
			}
			if x {
				granted++
			} else {
				denied++
			}
		default:
			clock.Advance(time.Duration(rng.Int64N(int64(window / 2))))
		}
	}
	if granted < 50 || denied < 50 {
		t.Errorf("%d retries granted and %d denied: too few of one to compare the keys", granted, denied)
	}
	if n := a.Errors() + b.Errors(); n != 0 {
		t.Errorf("%d failed calls to a healthy server", n)
	}
}

// hashFields reads the integer fields of a budget's hash: all but the
// fingerprint.
func hashFields(t *testing.T, client *redis.Client, key string) map[string]int64 {
	t.Helper()
	raw, err := client.HGetAll(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	f := make(map[string]int64, len(raw))
	for k, v := range raw {
		if k == "c" {
			continue // the configuration's fingerprint
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("field %s of %s: %v", k, key, err)
		}
		f[k] = n
	}
	return f
}

// ageRatioKey makes a Ratio's hash look as if its origin were age earlier
// and its slots had been numbered from slots further on, without changing
// the instant it last saw or any slot's place in the ring.
func ageRatioKey(t *testing.T, client *redis.Client, key string, ring int, age time.Duration, slots int64) {
	t.Helper()
	f := hashFields(t, client, key)
	sec := int64(age / time.Second)
	aged := []any{"o", f["o"] - sec, "l", f["l"] + sec*1e9, "h", f["h"] + slots}
	for i := range ring {
		if n, ok := f[fmt.Sprint("n", i)]; ok {
			aged = append(aged, fmt.Sprint("n", i), n+slots)
		}
	}
	if err := client.HSet(context.Background(), key, aged...).Err(); err != nil {
		t.Fatal(err)
	}
}

// The token bucket's script, too, moves its origin before instants pass
// 2^52 ns, without refilling anything for the move.
func TestTokenBucketMovesItsOrigin(t *testing.T) {
	s := startServer(t)
	client := s.client(t)
	name := fresh("aged")
	key := "retrybudget:{" + name + "}:tb"
	tb, err := redisbudget.NewTokenBucket(redisbudget.Config{Client: client, Name: name, CallTimeout: time.Second},
		budget.TokenBucketConfig{Capacity: 10, TransientCost: 1, ThrottledCost: 1, RefillPerSecond: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if !tb.Retry(budget.Transient) {
			t.Fatal("a bucket of 10 tokens denied one of the first 5 retries")
		}
	}
	f := hashFields(t, client, key)
	const sec = 60 * 24 * 3600
	if err := client.HSet(context.Background(), key, "o", f["o"]-sec, "s", f["s"]+sec*1e9).Err(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []int64{4000, 3000} { // milli-tokens, before a few ms of refill
		if !tb.Retry(budget.Transient) {
			t.Fatal("a retry was denied with about 5 tokens in the bucket")
		}
		f = hashFields(t, client, key)
		// One token a second: a call 1s late still leaves the bucket far
		// from full, which a refill for the move would make it.
		if got := f["t"]; got < want || got > want+1000 {
			t.Errorf("balance %d milli-tokens, want %d plus the refill of a few milliseconds", got, want)
		}
		if s := f["s"]; s <= 0 || s > 1<<52 {
			t.Errorf("latest instant %d ns after the origin, want it moved below 2^52", s)
		}
	}
}

// Stats counts the answers of one process; the balance is shared.
func TestStatsAndAvailable(t *testing.T) {
	s := startServer(t)
	client := s.client(t)
	ctx := context.Background()
	name := fresh("stats")
	cfg := budget.TokenBucketConfig{Capacity: 2, TransientCost: 1, ThrottledCost: 1}
	a, err := redisbudget.NewTokenBucket(redisbudget.Config{Client: client, Name: name}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := redisbudget.NewTokenBucket(redisbudget.Config{Client: client, Name: name}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := a.AvailableContext(ctx); v != 2 || err != nil {
		t.Errorf("AvailableContext of a new key = %v, %v; want 2, nil", v, err)
	}
	a.Retry(budget.Transient)
	b.Retry(budget.Transient)
	b.Retry(budget.Transient)
	if got, want := a.Stats(), (budget.Stats{Granted: 1}); got != want {
		t.Errorf("a.Stats() = %+v, want %+v", got, want)
	}
	if got, want := b.Stats(), (budget.Stats{Granted: 1, Denied: 1}); got != want {
		t.Errorf("b.Stats() = %+v, want %+v", got, want)
	}
	if v, err := b.AvailableContext(ctx); v != 0 || err != nil {
		t.Errorf("AvailableContext after two grants = %v, %v; want 0, nil", v, err)
	}

	r, err := redisbudget.NewRatio(redisbudget.Config{Client: client, Name: fresh("stats")}, budget.RatioConfig{Ratio: 0.5, Window: time.Minute, Slots: 6, Floor: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		r.Request()
	}
	r.Retry(budget.Transient)
	if v, err := r.AvailableContext(ctx); v != 1 || err != nil {
		t.Errorf("Ratio.AvailableContext = %v, %v; want 1 (half of 4, less 1), nil", v, err)
	}
	if got, want := r.Stats(), (budget.Stats{Granted: 1}); got != want {
		t.Errorf("Ratio.Stats() = %+v, want %+v", got, want)
	}
	s.kill()
	if _, err := r.AvailableContext(ctx); !errors.Is(err, redisbudget.ErrUnavailable) {
		t.Errorf("AvailableContext with the server down: %v, want ErrUnavailable", err)
	}
}

package redisbudget_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/redisbudget"
)

// A refused connection is named in the error's chain: go-redis redials in
// the background and hands the call only "context deadline exceeded".
func TestRefusedConnectionNamesItsCause(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	cfg := redisbudget.Config{Client: c, Name: fresh("refused"), CallTimeout: 50 * time.Millisecond}
	tb, err := redisbudget.NewTokenBucket(cfg, budget.DefaultTokenBucketConfig())
	if err != nil {
		t.Fatal(err)
	}
	ra, err := redisbudget.NewRatio(cfg, budget.DefaultRatioConfig())
	if err != nil {
		t.Fatal(err)
	}
	for name, retry := range map[string]func(context.Context, budget.Kind) (bool, error){"TokenBucket": tb.RetryContext, "Ratio": ra.RetryContext} {
		// The first call may end before its dial does; by the second, one
		// dial has failed.
		var err error
		for range 3 {
			if _, err = retry(context.Background(), budget.Transient); errors.Is(err, syscall.ECONNREFUSED) {
				break
			}
		}
		var op *net.OpError
		if !errors.Is(err, redisbudget.ErrUnavailable) || !errors.Is(err, syscall.ECONNREFUSED) || !errors.As(err, &op) || !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s: %v; want ErrUnavailable with the refused dial (a *net.OpError, ECONNREFUSED) in the chain", name, err)
		}
	}
}

// Hash fields that the scripts did not write are an error, ErrCorrupt,
// naming the field: they used to read as a new budget, full (a token
// bucket) or empty (a ratio).
func TestCorruptFieldsAreErrors(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		budget, field, value, want string
	}{
		{"tb", "t", "banana", `field t of retrybudget:{%s}:tb holds "banana"`},
		{"tb", "t", "-5", "outside [0,"},
		{"tb", "t", "99999999", "outside [0,"},
		{"tb", "f", "1.5", "not an integer"},
		{"tb", "s", "", "not an integer"},
		{"tb", "o", "-", "not an integer"},
		{"ratio", "q", "banana", `field q of retrybudget:{%s}:ratio holds "banana"`},
		{"ratio", "r", "-1", "not a count"},
		{"ratio", "l", "1e400", "not an integer"},
		{"ratio", "h", "x", "not an integer"},
		{"ratio", "q0", "banana", `field q0 of`},
		{"ratio", "n0", "x", `field n0 of`},
	} {
		name := fresh("fields")
		key := "retrybudget:{" + name + "}:" + tc.budget
		clock := fresh("clock")
		if err := c.Set(ctx, clock, 0, 0).Err(); err != nil {
			t.Fatal(err)
		}
		cfg := redisbudget.Config{Client: c, Name: name, ClockKey: clock, CallTimeout: time.Second}
		var retry func(context.Context, budget.Kind) (bool, error)
		if tc.budget == "tb" {
			b, err := redisbudget.NewTokenBucket(cfg, budget.TokenBucketConfig{Capacity: 10, TransientCost: 5, ThrottledCost: 5})
			if err != nil {
				t.Fatal(err)
			}
			retry = b.RetryContext
		} else {
			b, err := redisbudget.NewRatio(cfg, budget.RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Floor: 2})
			if err != nil {
				t.Fatal(err)
			}
			retry = b.RetryContext
		}
		// Spend the budget: two retries, and then a denial.
		for i := range 3 {
			if ok, err := retry(ctx, budget.Transient); err != nil || ok != (i < 2) {
				t.Fatalf("%s: retry %d on a healthy key: %v, %v", key, i+1, ok, err)
			}
		}
		if err := c.HSet(ctx, key, tc.field, tc.value).Err(); err != nil {
			t.Fatal(err)
		}
		if tc.field == "q0" || tc.field == "n0" {
			// Slot 0's fields are read when slot 0 leaves the window: the
			// window moves by 9 slots, which reads the empty slots 1 to
			// 9, and then by one more.
			if err := c.IncrBy(ctx, clock, int64(9*time.Second)).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := retry(ctx, budget.Transient); err != nil {
				t.Fatalf("%s: a call that reads none of slot 0: %v", key, err)
			}
			if err := c.IncrBy(ctx, clock, int64(time.Second)).Err(); err != nil {
				t.Fatal(err)
			}
		}
		want := tc.want
		if strings.Contains(want, "%s") {
			want = strings.ReplaceAll(want, "%s", name)
		}
		ok, err := retry(ctx, budget.Transient)
		if ok || !errors.Is(err, redisbudget.ErrCorrupt) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s with %s = %q: granted %v, %v; want a denial with ErrCorrupt naming %q", key, tc.field, tc.value, ok, err, want)
		}
	}
	// A key that lost a field is corrupt too, not new.
	for _, kind := range []string{"tb", "ratio"} {
		name := fresh("lost")
		cfg := redisbudget.Config{Client: c, Name: name, CallTimeout: time.Second}
		tb, _ := redisbudget.NewTokenBucket(cfg, budget.TokenBucketConfig{Capacity: 10, TransientCost: 5, ThrottledCost: 5})
		ra, _ := redisbudget.NewRatio(cfg, budget.RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Floor: 2})
		retry := map[string]func(context.Context, budget.Kind) (bool, error){"tb": tb.RetryContext, "ratio": ra.RetryContext}[kind]
		if _, err := retry(ctx, budget.Transient); err != nil {
			t.Fatal(err)
		}
		key := "retrybudget:{" + name + "}:" + kind
		field := map[string]string{"tb": "t", "ratio": "r"}[kind]
		if err := c.HDel(ctx, key, field).Err(); err != nil {
			t.Fatal(err)
		}
		if ok, err := retry(ctx, budget.Transient); ok || !errors.Is(err, redisbudget.ErrCorrupt) || !strings.Contains(err.Error(), "field "+field+" of "+key+" is missing") {
			t.Errorf("%s without field %s: granted %v, %v; want ErrCorrupt naming the missing field", key, field, ok, err)
		}
	}
}

// Two processes that share a Name must share the configuration: the key
// keeps the fingerprint of the one that made it, and a call with another
// fails with ErrConfigMismatch naming both.
func TestConfigMismatchIsAnError(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	name := fresh("mismatch")
	cfg := redisbudget.Config{Client: c, Name: name, CallTimeout: time.Second}
	small := budget.TokenBucketConfig{Capacity: 10, TransientCost: 5, ThrottledCost: 5}
	big := small
	big.Capacity = 500
	a, _ := redisbudget.NewTokenBucket(cfg, small)
	same, _ := redisbudget.NewTokenBucket(cfg, small)
	other, _ := redisbudget.NewTokenBucket(cfg, big)
	if ok, err := a.RetryContext(ctx, budget.Transient); !ok || err != nil {
		t.Fatalf("first retry: %v, %v", ok, err)
	}
	if ok, err := same.RetryContext(ctx, budget.Transient); !ok || err != nil {
		t.Errorf("a second process with the same configuration: %v, %v; want a grant", ok, err)
	}
	ok, err := other.RetryContext(ctx, budget.Transient)
	if ok || !errors.Is(err, redisbudget.ErrConfigMismatch) || !strings.Contains(err.Error(), "capacity=10 ") || !strings.Contains(err.Error(), "capacity=500 ") {
		t.Errorf("a process with capacity 500 on a key made with 10: granted %v, %v; want ErrConfigMismatch naming both", ok, err)
	}

	rname := fresh("mismatch")
	rcfg := redisbudget.Config{Client: c, Name: rname, CallTimeout: time.Second}
	r1, _ := redisbudget.NewRatio(rcfg, budget.RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Floor: 3})
	r2, _ := redisbudget.NewRatio(rcfg, budget.RatioConfig{Ratio: 0.2, Window: 10 * time.Second, Slots: 10, Floor: 3})
	if err := r1.RequestContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r2.RequestContext(ctx); !errors.Is(err, redisbudget.ErrConfigMismatch) || !strings.Contains(err.Error(), "ratio=0.1 ") || !strings.Contains(err.Error(), "ratio=0.2 ") {
		t.Errorf("a ratio of 0.2 on a key made with 0.1: %v; want ErrConfigMismatch naming both", err)
	}

	// A key written before fingerprints were kept takes the first
	// configuration that calls it.
	lname := fresh("legacy")
	lkey := "retrybudget:{" + lname + "}:tb"
	if err := c.HSet(ctx, lkey, "t", 10000, "f", 0, "s", 0, "o", 0).Err(); err != nil {
		t.Fatal(err)
	}
	lcfg := redisbudget.Config{Client: c, Name: lname, Clock: new(budget.ManualClock), CallTimeout: time.Second}
	l1, _ := redisbudget.NewTokenBucket(lcfg, small)
	l2, _ := redisbudget.NewTokenBucket(lcfg, big)
	if ok, err := l1.RetryContext(ctx, budget.Transient); !ok || err != nil {
		t.Errorf("a key without a fingerprint: %v, %v; want it adopted", ok, err)
	}
	if _, err := l2.RetryContext(ctx, budget.Transient); !errors.Is(err, redisbudget.ErrConfigMismatch) {
		t.Errorf("after adoption, another configuration: %v; want ErrConfigMismatch", err)
	}
}

// budget.Retrier calls the Context methods, and a Redis outage reaches the
// caller as ErrUnavailable under budget.ErrBudgetUnavailable, not as a
// denial.
func TestRetrierSeesRedisUnavailable(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	tb, err := redisbudget.NewTokenBucket(redisbudget.Config{Client: c, Name: fresh("retrier"), CallTimeout: 50 * time.Millisecond}, budget.DefaultTokenBucketConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := &budget.Retrier{Budget: tb, MaxAttempts: 2, Jitter: func(time.Duration) time.Duration { return 0 }}
	opErr := errors.New("dependency failed")
	op := func(context.Context, budget.Attempt) error { return opErr }
	if err := r.Do(context.Background(), op); !errors.Is(err, budget.ErrAttempts) {
		t.Fatalf("with Redis up: %v; want ErrAttempts after a granted retry", err)
	}
	s.kill()
	err = r.Do(context.Background(), op)
	if !errors.Is(err, budget.ErrBudgetUnavailable) || !errors.Is(err, redisbudget.ErrUnavailable) || !errors.Is(err, opErr) || errors.Is(err, budget.ErrDenied) {
		t.Errorf("with Redis down: %v; want ErrBudgetUnavailable wrapping redisbudget.ErrUnavailable and the operation's error, not ErrDenied", err)
	}
}

// hookCounter is a client that counts the hooks added to it.
type hookCounter struct {
	*redis.Client
	hooks int
}

func (h *hookCounter) AddHook(hook redis.Hook) {
	h.hooks++
	h.Client.AddHook(hook)
}

// Budgets built on one client share one hook: go-redis cannot remove a
// hook, and one per budget grew without bound in a program that builds
// budgets as it goes. Every budget still names a refused dial.
func TestOneHookPerClient(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := &hookCounter{Client: redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})}
	defer c.Close()
	cfg := redisbudget.Config{Client: c, Name: fresh("hooks"), CallTimeout: 50 * time.Millisecond}
	var last *redisbudget.Ratio
	for range 100 {
		if _, err := redisbudget.NewTokenBucket(cfg, budget.DefaultTokenBucketConfig()); err != nil {
			t.Fatal(err)
		}
		if last, err = redisbudget.NewRatio(cfg, budget.DefaultRatioConfig()); err != nil {
			t.Fatal(err)
		}
	}
	if c.hooks != 1 {
		t.Errorf("200 budgets on one client added %d hooks to it, want 1", c.hooks)
	}
	for range 3 {
		if _, err = last.RetryContext(context.Background(), budget.Transient); errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("the 200th budget: %v; want the refused dial in the chain", err)
	}
	// Another client gets a hook of its own.
	other := &hookCounter{Client: redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})}
	defer other.Close()
	cfg.Client = other
	if _, err := redisbudget.NewRatio(cfg, budget.DefaultRatioConfig()); err != nil {
		t.Fatal(err)
	}
	if other.hooks != 1 {
		t.Errorf("a second client got %d hooks, want 1", other.hooks)
	}
}

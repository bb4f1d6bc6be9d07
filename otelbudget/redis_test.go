package otelbudget_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/otelbudget"
	"github.com/retrybudget/retrybudget/redisbudget"
)

// startRedis starts a redis-server of the test's own on a free loopback
// port, without persistence, and returns its address and a func that kills
// it (the test's end kills it too). Without redis-server on PATH it skips
// the test, or fails it under CI=true.
func startRedis(t *testing.T) (addr string, kill func()) {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed, and CI=true")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(), "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	kill = func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	t.Cleanup(kill)
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return addr, kill
}

// quiet drops go-redis's log lines about the dials that fail once the
// server is killed.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// A budget kept in Redis reports its counts and its shared balance, and
// no balance once Redis is gone.
func TestObserveRedisTokenBucket(t *testing.T) {
	addr, kill := startRedis(t)
	redis.SetLogger(quiet{})
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { client.Close() })
	var failures atomic.Int64
	tb, err := redisbudget.NewTokenBucket(
		redisbudget.Config{Client: client, Name: "otelbudget", OnError: func(error) { failures.Add(1) }},
		budget.TokenBucketConfig{Capacity: 10, TransientCost: 4, ThrottledCost: 1})
	if err != nil {
		t.Fatal(err)
	}
	meter, reader := newMeter(t)
	reg, err := otelbudget.Observe(meter, "payments", tb)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	defer reg.Unregister()
	for range 3 {
		tb.Retry(budget.Transient) // granted, granted, denied
	}
	counts := map[string]float64{
		"retrybudget.budget.retries{retrybudget.budget=payments,retrybudget.granted=true}":  2,
		"retrybudget.budget.retries{retrybudget.budget=payments,retrybudget.granted=false}": 1,
	}
	want := map[string]float64{"retrybudget.budget.available{retrybudget.budget=payments}": 2}
	for k, v := range counts {
		want[k] = v
	}
	checkPoints(t, points(t, reader), want)

	kill()
	before := failures.Load()
	checkPoints(t, points(t, reader), counts)
	if failures.Load() == before {
		t.Errorf("the balance read after Redis died reported no error to OnError")
	}
}

package otelbudget_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/redisserver"
	"github.com/retrybudget/retrybudget/otelbudget"
	"github.com/retrybudget/retrybudget/redisbudget"
)

// quiet drops go-redis's log lines about the dials that fail once the
// server is killed.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// A budget kept in Redis reports its counts and its shared balance, and
// no balance once Redis is gone.
func TestObserveRedisTokenBucket(t *testing.T) {
	srv := redisserver.Start(t)
	addr, kill := srv.Addr, srv.Kill
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

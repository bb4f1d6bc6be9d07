package redisbudget_test

import (
	"context"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/redisbudget"
)

// A benchOp makes one call and appends its latency to lat, or appends
// nothing if the call it made did not reach Redis (Ratio's Success). Each
// client goroutine has its own.
type benchOp func(lat []time.Duration) []time.Duration

// benchmarkOps runs b.N calls, split among clients goroutines, each with an
// op from newOp, and reports calls/s and the p50 and p99 latency of one
// call. Before the timer starts each op makes two calls, not measured:
// they dial its connection and load its script.
func benchmarkOps(b *testing.B, clients int, newOp func() benchOp) {
	b.ReportAllocs()
	ops := make([]benchOp, clients)
	lat := make([][]time.Duration, clients)
	for c := range ops {
		ops[c] = newOp()
		var warm [2]time.Duration
		ops[c](ops[c](warm[:0]))
		n := b.N / clients
		if c < b.N%clients {
			n++
		}
		lat[c] = make([]time.Duration, 0, n)
	}
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		n := cap(lat[c])
		wg.Go(func() {
			op, l := ops[c], lat[c]
			for range n {
				l = op(l)
			}
			lat[c] = l
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
		b.ReportMetric(float64(all[len(all)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds())/1e3, "p99-µs")
	}
}

// budgetOp makes the calls of a retry that succeeds: a Retry and, when it
// is granted, a Success, each call an op of its own and measured. If
// successCalls is false (Ratio's Success reaches no server) the Success is
// made right after its Retry and not measured: every sample is then one
// Redis call.
func budgetOp(bud budget.Budget, successCalls bool) benchOp {
	granted := false
	return func(lat []time.Duration) []time.Duration {
		t0 := time.Now()
		if granted {
			bud.Success(budget.Transient)
			granted = false
			return append(lat, time.Since(t0))
		}
		ok := bud.Retry(budget.Transient)
		lat = append(lat, time.Since(t0))
		if ok {
			if successCalls {
				granted = true
			} else {
				bud.Success(budget.Transient)
			}
		}
		return lat
	}
}

// ratioOp alternates a Request and a Retry, each a call to Redis and a
// sample: the window then holds requests, and about one retry in ten is
// granted (the default ratio), as in a fleet where one call in ten fails,
// rather than every retry denied past the floor.
func ratioOp(bud *redisbudget.Ratio) benchOp {
	request := true
	return func(lat []time.Duration) []time.Duration {
		t0 := time.Now()
		if request {
			bud.Request()
		} else {
			bud.Retry(budget.Transient)
		}
		request = !request
		return append(lat, time.Since(t0))
	}
}

// benchClient is clientTB with one connection: each client goroutine of a
// benchmark talks to Redis over a connection of its own.
func benchClient(b *testing.B, s *server) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: s.addr(), MaxRetries: -1, PoolSize: 1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond,
		ContextTimeoutEnabled: true,
	})
	b.Cleanup(func() { c.Close() })
	return c
}

// rawScript is the least a script call can cost: EVALSHA (EVAL if the
// server lacks it) of a script that touches nothing.
var rawScript = redis.NewScript(`return 1`)

// BenchmarkCalls compares, one sample per call: the in-process
// budget.TokenBucket; a PING and a raw EVALSHA of a trivial script; and
// each Redis budget. The Redis sub-benchmarks share one server, and each
// client goroutine has a client of its own with one connection.
func BenchmarkCalls(b *testing.B) {
	var shared *server
	if _, err := exec.LookPath("redis-server"); err == nil {
		shared = startServerTB(b)
	}
	srv := func(b *testing.B) *server {
		if shared == nil {
			return startServerTB(b) // skips, or fails under CI=true
		}
		return shared
	}
	for _, clients := range []int{1, 8} {
		name := "sequential"
		if clients > 1 {
			name = "8clients"
		}
		b.Run("InProcessTokenBucket/"+name, func(b *testing.B) {
			bud, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
			benchmarkOps(b, clients, func() benchOp { return budgetOp(bud, true) })
		})
		b.Run("PING/"+name, func(b *testing.B) {
			s := srv(b)
			benchmarkOps(b, clients, func() benchOp {
				c := benchClient(b, s)
				ctx := context.Background()
				return func(lat []time.Duration) []time.Duration {
					t0 := time.Now()
					if err := c.Ping(ctx).Err(); err != nil {
						b.Error(err)
					}
					return append(lat, time.Since(t0))
				}
			})
		})
		b.Run("RawEVALSHA/"+name, func(b *testing.B) {
			s := srv(b)
			keys := []string{"retrybudget:{" + fresh("bench") + "}:raw"}
			benchmarkOps(b, clients, func() benchOp {
				c := benchClient(b, s)
				ctx := context.Background()
				return func(lat []time.Duration) []time.Duration {
					t0 := time.Now()
					if err := rawScript.Run(ctx, c, keys).Err(); err != nil {
						b.Error(err)
					}
					return append(lat, time.Since(t0))
				}
			})
		})
		b.Run("RedisTokenBucket/"+name, func(b *testing.B) {
			s := srv(b)
			nameKey := fresh("bench")
			var made []*redisbudget.TokenBucket
			benchmarkOps(b, clients, func() benchOp {
				bud, err := redisbudget.NewTokenBucket(redisbudget.Config{Client: benchClient(b, s), Name: nameKey, CallTimeout: time.Second}, budget.DefaultTokenBucketConfig())
				if err != nil {
					b.Fatal(err)
				}
				made = append(made, bud)
				return budgetOp(bud, true)
			})
			for _, bud := range made {
				if n := bud.Errors(); n > 0 {
					b.Errorf("%d calls failed", n)
				}
			}
		})
		b.Run("RedisRatio/"+name, func(b *testing.B) {
			s := srv(b)
			nameKey := fresh("bench")
			var made []*redisbudget.Ratio
			benchmarkOps(b, clients, func() benchOp {
				bud, err := redisbudget.NewRatio(redisbudget.Config{Client: benchClient(b, s), Name: nameKey, CallTimeout: time.Second}, budget.DefaultRatioConfig())
				if err != nil {
					b.Fatal(err)
				}
				made = append(made, bud)
				return ratioOp(bud)
			})
			for _, bud := range made {
				if n := bud.Errors(); n > 0 {
					b.Errorf("%d calls failed", n)
				}
			}
		})
	}
}

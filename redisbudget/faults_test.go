package redisbudget_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/redisbudget"
)

// netBudget is one client's handle on a shared Redis budget: a call either
// answers or fails (its outcome then unknown).
type netBudget func(ctx context.Context, op model.Op) (granted bool, err error)

func tokenBucketClient(m model.TokenBucket, cfg redisbudget.Config) (netBudget, error) {
	b, err := redisbudget.NewTokenBucket(cfg, seqcheck.TokenBucketConfig(m, nil))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, op model.Op) (bool, error) {
		switch op.Op {
		case model.Retry:
			return b.RetryContext(ctx, budget.Kind(op.Kind))
		case model.Success:
			return false, b.SuccessContext(ctx, budget.Kind(op.Kind))
		}
		return false, nil // Request: no call
	}, nil
}

func ratioClient(m model.Ratio, cfg redisbudget.Config) (netBudget, error) {
	b, err := redisbudget.NewRatio(cfg, seqcheck.RatioConfig(m, nil))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, op model.Op) (bool, error) {
		switch op.Op {
		case model.Request:
			return false, b.RequestContext(ctx)
		case model.Retry:
			return b.RetryContext(ctx, budget.Kind(op.Kind))
		}
		return false, nil // Success: no call
	}, nil
}

// recordNet runs scenario sc on a budget shared by len(sc.Goroutines)
// clients, each with its own connection pool, while a clock goroutine steps
// the server-side clock and, for fault "stop" or "kill", a fault goroutine
// stops the server for 2s or kills and restarts it. A failed call is
// recorded as pending; a restart, which loses the budget, as a reset.
func recordNet(t *testing.T, s *server, sc linearizability.Scenario, fault string, newClient func(redisbudget.Config) (netBudget, error)) linearizability.History {
	t.Helper()
	name, clockKey := fresh("net"), fresh("clock")
	admin := s.client(t)
	ctx := context.Background()
	if err := admin.Set(ctx, clockKey, 0, 0).Err(); err != nil {
		t.Fatal(err)
	}
	var (
		stamp   atomic.Int64
		mu      sync.Mutex
		h       linearizability.History
		clockMu sync.Mutex // the kill fault holds it, so that it knows the clock's reading
		clockAt int64      // the clock's reading, as far as the clock goroutine knows
	)
	add := func(o linearizability.Operation) {
		mu.Lock()
		h = append(h, o)
		mu.Unlock()
	}
	k := len(sc.Goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g, ops := range sc.Goroutines {
		client := s.client(t)
		b, err := newClient(redisbudget.Config{Client: client, Name: name, ClockKey: clockKey, CallTimeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(g), 1))
		wg.Go(func() {
			<-start
			for _, op := range ops {
				o := linearizability.Operation{Client: g + 1, Op: op}
				o.Call = stamp.Add(1)
				granted, err := b(ctx, op)
				o.Return = stamp.Add(1)
				o.Granted, o.Pending = granted, err != nil
				add(o)
				if err != nil {
					// Like a client behind a circuit breaker: after a failure,
					// wait for the server before the next call. Each pending
					// call multiplies the orders the checker must try.
					waitHealthy(client)
				}
				time.Sleep(time.Duration(200+rng.IntN(800)) * time.Microsecond)
			}
		})
	}
	wg.Go(func() {
		<-start
		for _, d := range sc.Clock {
			clockMu.Lock()
			o := linearizability.Operation{Client: k + 1, Op: model.OpAdvance(d)}
			o.Call = stamp.Add(1)
			cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			v, err := admin.IncrBy(cctx, clockKey, int64(d)).Result()
			cancel()
			o.Return = stamp.Add(1)
			o.Pending = err != nil
			if err == nil {
				clockAt = v
			}
			add(o)
			if err != nil {
				waitHealthy(admin)
				// The step may have landed: learn the clock's reading.
				if v, err := admin.Get(ctx, clockKey).Int64(); err == nil {
					clockAt = v
				}
			}
			clockMu.Unlock()
			time.Sleep(3 * time.Millisecond)
		}
	})
	if fault != "none" {
		wg.Go(func() {
			<-start
			time.Sleep(20 * time.Millisecond) // mid-run
			switch fault {
			case "stop":
				s.pause()
				time.Sleep(2 * time.Second)
				s.resume()
			case "kill":
				clockMu.Lock()
				o := linearizability.Operation{Client: k + 2, Op: model.OpReset}
				o.Call = stamp.Add(1)
				s.kill()
				s.startWith(map[string]string{clockKey: strconv.FormatInt(clockAt, 10)})
				o.Return = stamp.Add(1)
				add(o)
				clockMu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	return h
}

var (
	netBucket = model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 10_000}
	netRatio  = model.Ratio{PPM: 100_000, Window: 10 * time.Second, Slots: 10, Floor: 3}
)

// TestLinearizableUnderFaults checks histories of 4 clients × 100 calls on
// a shared Redis budget, with no fault, with the server stopped for 2s
// mid-run, and with the server killed and restarted without persistence.
// Run with -redis.scenarios=50 for the acceptance level.
func TestLinearizableUnderFaults(t *testing.T) {
	s := startServer(t)
	for _, fault := range []string{"none", "stop", "kill"} {
		t.Run(fault, func(t *testing.T) {
			var linearizable, violations, inconclusive, pending int
			for seed := range uint64(*scenarios) {
				var verdict linearizability.Verdict
				var explain string
				var hist linearizability.History
				if seed%2 == 0 {
					tm := seqcheck.TokenBucketTiming(netBucket)
					tm.Forward = true
					sc := scenario(seed+1, 5, tm)
					hist = recordNet(t, s, sc, fault, func(c redisbudget.Config) (netBudget, error) { return tokenBucketClient(netBucket, c) })
					r := linearizability.Check(netBucket, hist, 60*time.Second)
					verdict, explain = r.Verdict, r.Explain()
					if verdict == linearizability.Violation {
						_, _, note := linearizability.Report(t, r, linearizability.Fixture{Name: fmt.Sprintf("%s-seed%d", fault, seed), Budget: "redisbudget.TokenBucket", Scenario: &sc})
						explain += note
					}
				} else {
					tm := seqcheck.RatioTiming(netRatio)
					tm.Forward = true
					sc := scenario(seed+1, 5, tm)
					hist = recordNet(t, s, sc, fault, func(c redisbudget.Config) (netBudget, error) { return ratioClient(netRatio, c) })
					r := linearizability.Check(netRatio, hist, 60*time.Second)
					verdict, explain = r.Verdict, r.Explain()
					if verdict == linearizability.Violation {
						_, _, note := linearizability.Report(t, r, linearizability.Fixture{Name: fmt.Sprintf("%s-seed%d", fault, seed), Budget: "redisbudget.Ratio", Scenario: &sc})
						explain += note
					}
				}
				for _, o := range hist {
					if o.Pending {
						pending++
					}
				}
				switch verdict {
				case linearizability.Linearizable:
					linearizable++
				case linearizability.Inconclusive:
					inconclusive++
					t.Logf("seed %d: %s", seed, explain)
				default:
					violations++
					t.Errorf("seed %d: not linearizable:\n%s", seed, explain)
				}
			}
			t.Logf("fault %q: %d scenarios, %d linearizable, %d violations, %d inconclusive (not passes); %d pending calls recorded",
				fault, *scenarios, linearizable, violations, inconclusive, pending)
			if inconclusive > 0 {
				t.Errorf("%d of %d scenarios were inconclusive: they prove nothing", inconclusive, *scenarios)
			}
			if fault == "stop" && pending == 0 {
				t.Errorf("the server was stopped for 2s, yet no call failed: the fault did not happen")
			}
		})
	}
}

// waitHealthy waits until the server answers a PING, for at most 10s.
func waitHealthy(c *redis.Client) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scenario draws the concurrent scenario of a seed: 4 goroutines of 100
// operations, and 20 clock steps when tm has a scale.
func scenario(seed, stream uint64, tm seqcheck.Timing) linearizability.Scenario {
	g, c := harness.Lists(harness.Rand(rand.New(rand.NewPCG(seed, stream))), 4, 100, 20, tm)
	return linearizability.Scenario{Goroutines: g, Clock: c}
}

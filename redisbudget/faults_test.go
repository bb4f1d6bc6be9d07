package redisbudget_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
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

// A rig is where a history is recorded: a server or a cluster, and how
// to reach it.
type rig struct {
	// client returns a new client with its own connection pool.
	client func() redis.UniversalClient
	// admin steps the clock and makes the faults.
	admin redis.UniversalClient
	// healthy waits, for at most 10s, until c can reach the budget's key.
	healthy func(c redis.UniversalClient)
	// name and clockKey are the budget's Name and its ClockKey, which must
	// share a hash slot on a cluster.
	name, clockKey string
	// hold, if set, makes each client wait at the middle of its calls
	// until the fault is over, so that calls are made after it as well as
	// before and during it.
	hold bool
	// noEffect, if set, reports whether a call made at stamp call that
	// failed with err is known to have had no effect; it is then left out
	// of the history, as notRun's are.
	noEffect func(call int64, err error) bool
}

// ran reports whether a call made at stamp call that failed with err is
// known to have had no effect (a nil err: it had one).
func (rg rig) ran(call int64, err error) bool {
	return err != nil && (notRun(err) || rg.noEffect != nil && rg.noEffect(call, err))
}

// notRun reports whether err proves that the call had no effect: Redis
// answered that it did not run the command here (MOVED, ASK, READONLY,
// CLUSTERDOWN, TRYAGAIN, LOADING, MASTERDOWN). Such a call is left out of
// the history, as if it had not been made; a call that failed in any other
// way may have run, and is pending.
func notRun(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	for _, p := range []string{"MOVED ", "ASK ", "READONLY ", "CLUSTERDOWN ", "TRYAGAIN ", "LOADING ", "MASTERDOWN "} {
		if strings.HasPrefix(re.Error(), p) {
			return true
		}
	}
	return false
}

// serverRig is a rig on s, for a budget of a fresh name.
func serverRig(t *testing.T, s *server) rig {
	return rig{
		client:  func() redis.UniversalClient { return s.client(t) },
		admin:   s.client(t),
		healthy: func(c redis.UniversalClient) { waitHealthy(c) },
		name:    fresh("net"), clockKey: fresh("clock"),
	}
}

// A recording is one history as it is recorded, which a fault may add to.
type recording struct {
	stamp   atomic.Int64
	mu      sync.Mutex
	h       model.History
	clients int        // the budget's clients are 1 to clients; the clock is clients+1
	clockMu sync.Mutex // a fault that must know the clock's reading holds it
	clockAt int64      // the clock's reading, as far as the clock goroutine knows
	// unsure holds windows of stamps [from, to]: a call that returned
	// after from and was made before to may have been lost (acknowledged
	// by a server whose writes did not survive), so it is recorded as
	// pending, its answer not trusted.
	unsure [][2]int64
	// settled holds stamps taken just after a server was killed: a
	// pending call made before one went to a server that can no longer
	// apply it, so it took effect before the stamp or never.
	settled []int64
}

func (r *recording) now() int64 { return r.stamp.Add(1) }

func (r *recording) add(o model.Operation) {
	r.mu.Lock()
	r.h = append(r.h, o)
	r.mu.Unlock()
}

// lost records that calls returning after stamp from and made before
// stamp to may have been lost.
func (r *recording) lost(from, to int64) {
	r.mu.Lock()
	r.unsure = append(r.unsure, [2]int64{from, to})
	r.mu.Unlock()
}

// killed records that the server that every call so far went to was
// killed just before stamp at.
func (r *recording) killed(at int64) {
	r.mu.Lock()
	r.settled = append(r.settled, at)
	r.mu.Unlock()
}

// history returns the history, with the calls in an unsure window pending,
// and each pending call made before a kill settled by it.
func (r *recording) history() model.History {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.h {
		o := &r.h[i]
		for _, w := range r.unsure {
			if o.Return > w[0] && o.Call < w[1] {
				o.Pending = true
			}
		}
		for _, at := range r.settled {
			if o.Pending && o.Call < at && (o.Settled == 0 || at < o.Settled) {
				o.Settled = at
			}
		}
	}
	return r.h
}

// recordNet runs scenario sc on a budget shared by len(sc.Goroutines)
// clients, each with its own connection pool, while a clock goroutine steps
// the server-side clock and, for fault "stop" or "kill", a fault goroutine
// stops the server for 2s or kills and restarts it. A failed call is
// recorded as pending; a restart, which loses the budget, as a reset.
func recordNet(t *testing.T, s *server, sc linearizability.Scenario, fault string, newClient func(redisbudget.Config) (netBudget, error)) model.History {
	t.Helper()
	rg := serverRig(t, s)
	var f func(*recording)
	switch fault {
	case "stop":
		f = func(*recording) {
			s.pause()
			time.Sleep(2 * time.Second)
			s.resume()
		}
	case "kill":
		f = func(r *recording) {
			r.clockMu.Lock()
			defer r.clockMu.Unlock()
			o := model.Operation{Client: r.clients + 2, Op: model.OpReset}
			o.Call = r.now()
			s.kill()
			s.startWith(map[string]string{rg.clockKey: strconv.FormatInt(r.clockAt, 10)})
			o.Return = r.now()
			r.add(o)
		}
	}
	return record(t, rg, sc, f, newClient)
}

// record runs scenario sc on rg's budget, shared by len(sc.Goroutines)
// clients, each with its own connection pool, while a clock goroutine steps
// the server-side clock and, if fault is not nil, a fault goroutine runs
// fault 20ms into the run. A failed call is recorded as pending.
func record(t *testing.T, rg rig, sc linearizability.Scenario, fault func(*recording), newClient func(redisbudget.Config) (netBudget, error)) model.History {
	t.Helper()
	ctx := context.Background()
	if err := rg.admin.Set(ctx, rg.clockKey, 0, 0).Err(); err != nil {
		t.Fatal(err)
	}
	r := &recording{clients: len(sc.Goroutines)}
	start, faulted := make(chan struct{}), make(chan struct{})
	if fault == nil || !rg.hold {
		close(faulted)
	}
	var wg sync.WaitGroup
	for g, ops := range sc.Goroutines {
		client := rg.client()
		b, err := newClient(redisbudget.Config{Client: client, Name: rg.name, ClockKey: rg.clockKey, CallTimeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(g), 1))
		wg.Go(func() {
			<-start
			for i, op := range ops {
				if i == len(ops)/2 {
					<-faulted
				}
				o := model.Operation{Client: g + 1, Op: op}
				o.Call = r.now()
				granted, err := b(ctx, op)
				o.Return = r.now()
				o.Granted, o.Pending = granted, err != nil
				if !rg.ran(o.Call, err) {
					r.add(o)
				}

				if err != nil {
					// Like a client behind a circuit breaker: after a failure,
					// wait for the server before the next call. Each pending
					// call multiplies the orders the checker must try.
					rg.healthy(client)
				}
				time.Sleep(time.Duration(200+rng.IntN(800)) * time.Microsecond)
			}
		})
	}
	wg.Go(func() {
		<-start
		for _, d := range sc.Clock {
			r.clockMu.Lock()
			o := model.Operation{Client: r.clients + 1, Op: model.OpAdvance(d)}
			o.Call = r.now()
			cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			v, err := rg.admin.IncrBy(cctx, rg.clockKey, int64(d)).Result()
			cancel()
			o.Return = r.now()
			o.Pending = err != nil
			if err == nil {
				r.clockAt = v
			}
			if !rg.ran(o.Call, err) {
				r.add(o)
			}
			if err != nil {
				rg.healthy(rg.admin)
				// The step may have landed: learn the clock's reading.
				if v, err := rg.admin.Get(ctx, rg.clockKey).Int64(); err == nil {
					r.clockAt = v
				}
			}
			r.clockMu.Unlock()
			time.Sleep(3 * time.Millisecond)
		}
	})
	if fault != nil {
		wg.Go(func() {
			<-start
			if rg.hold {
				defer close(faulted)
			}
			time.Sleep(20 * time.Millisecond) // mid-run
			fault(r)
		})
	}
	close(start)
	wg.Wait()
	return r.history()
}

var (
	netBucket = model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 10_000}
	netRatio  = model.Ratio{PPM: 100_000, Window: 10 * time.Second, Slots: 10, Floor: 3, Reserve: 2} // the floor below 20 requests, the reserve above
)

// TestLinearizableUnderFaults checks histories of 4 clients × 100 calls on
// a shared Redis budget, with no fault, with the server stopped for 2s
// mid-run, and with the server killed and restarted without persistence.
// Run with -redis.scenarios=50 for the acceptance level.
func TestLinearizableUnderFaults(t *testing.T) {
	s := startServer(t)
	for _, fault := range []string{"none", "stop", "kill"} {
		t.Run(fault, func(t *testing.T) {
			pending := checkScenarios(t, fault, *scenarios, func(sc linearizability.Scenario, newClient func(redisbudget.Config) (netBudget, error)) model.History {
				return recordNet(t, s, sc, fault, newClient)
			})
			if fault == "stop" && pending == 0 {
				t.Errorf("the server was stopped for 2s, yet no call failed: the fault did not happen")
			}
		})
	}
}

// checkScenarios records n scenarios with rec, the first, third, ... on
// a token bucket and the others on a ratio, through linearizability.Search,
// and fails the test for a violation (the first of each budget, explained)
// and for an inconclusive check. It returns how many calls were recorded
// as pending.
func checkScenarios(t *testing.T, fault string, n int, rec func(linearizability.Scenario, func(redisbudget.Config) (netBudget, error)) model.History) (pending int) {
	t.Helper()
	var scenarios int
	record := func(newClient func(redisbudget.Config) (netBudget, error)) func(linearizability.Scenario) (model.History, error) {
		return func(sc linearizability.Scenario) (model.History, error) {
			scenarios++
			h := rec(sc, newClient)
			for _, o := range h {
				if o.Pending {
					pending++
				}
			}
			return h, nil
		}
	}
	found := func(f *linearizability.Finding, err error) {
		t.Helper()
		switch {
		case err != nil:
			t.Errorf("%v", err)
		case f != nil && f.Verdict == linearizability.Inconclusive:
			t.Errorf("inconclusive, which proves nothing: %s", f.Detail)
		case f != nil:
			t.Errorf("not linearizable:\n%s", f.Detail)
		}
	}
	bucketTiming, ratioTiming := seqcheck.TokenBucketTiming(netBucket), seqcheck.RatioTiming(netRatio)
	bucketTiming.Forward, ratioTiming.Forward = true, true
	if k := (n + 1) / 2; k > 0 {
		found(linearizability.Search(t, linearizability.Target[model.TokenBucketState]{
			Name: "TokenBucket-" + fault, Model: netBucket, Scenarios: k, Timeout: 60 * time.Second,
			Draw:   func(seed uint64) linearizability.Scenario { return scenario(2*seed-1, 5, bucketTiming) },
			Record: record(func(c redisbudget.Config) (netBudget, error) { return tokenBucketClient(netBucket, c) }),
		}))
	}
	if k := n / 2; k > 0 {
		found(linearizability.Search(t, linearizability.Target[model.RatioState]{
			Name: "Ratio-" + fault, Model: netRatio, Scenarios: k, Timeout: 60 * time.Second,
			Draw:   func(seed uint64) linearizability.Scenario { return scenario(2*seed, 5, ratioTiming) },
			Record: record(func(c redisbudget.Config) (netBudget, error) { return ratioClient(netRatio, c) }),
		}))
	}
	t.Logf("fault %q: %d scenarios recorded; %d pending calls", fault, scenarios, pending)
	return pending
}

// answeredAfter counts the calls of the budget's clients (1 to clients)
// made after stamp that were answered: a fault that ended after the last
// of them did not happen mid-run.
func answeredAfter(h model.History, clients int, stamp int64) int {
	n := 0
	for _, o := range h {
		if o.Call > stamp && o.Client <= clients && !o.Pending {
			n++
		}
	}
	return n
}

// waitHealthy waits until the server answers a PING, for at most 10s.
func waitHealthy(c redis.UniversalClient) {
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

// proxyRig is serverRig with the budget's clients behind p; the clock's
// steps go to s directly.
func proxyRig(t *testing.T, s *server, p *faultProxy) rig {
	rg := serverRig(t, s)
	rg.client = func() redis.UniversalClient {
		c := redis.NewClient(&redis.Options{
			Addr: p.addr(), MaxRetries: -1, PoolSize: 4,
			DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond,
			ContextTimeoutEnabled: true,
		})
		t.Cleanup(func() { c.Close() })
		return c
	}
	return rg
}

// networkFaults returns the faults of p that scenario n runs mid-run, two
// of them in turn, by turns: replies delayed past CallTimeout and replies
// lost after the script ran; every connection cut and new ones refused,
// and every connection half-open; a black hole and lost replies again.
// Each scenario gets a few faults only: every failed call is pending, and
// each pending call multiplies the orders the checker must try.
func networkFaults(p *faultProxy, n int) func(*recording) {
	phase := func(on func(), d time.Duration, off func()) {
		on()
		time.Sleep(d)
		off()
	}
	delay := func() {
		phase(func() { p.setDelay(60 * time.Millisecond) }, 80*time.Millisecond, func() { p.setDelay(0) })
	}
	drop := func() {
		phase(func() { p.setDropReplies(true) }, 30*time.Millisecond, func() { p.setDropReplies(false) })
	}
	// The cut makes every client redial, into the refusals.
	cut := func() {
		phase(func() { p.setRefuse(true); p.cut() }, 30*time.Millisecond, func() { p.setRefuse(false) })
	}
	halfOpen := func() { p.halfOpen(); time.Sleep(30 * time.Millisecond) }
	hole := func() { phase(func() { p.setBlackhole(true) }, 30*time.Millisecond, func() { p.setBlackhole(false) }) }
	faults := [][]func(){{delay, drop}, {cut, halfOpen}, {hole, drop}}[n%3]
	return func(*recording) {
		for _, f := range faults {
			f()
		}
	}
}

// TestLinearizableThroughNetworkFaults checks histories of 4 clients × 100
// calls that reach the server through a fault proxy, which delays, loses
// replies (the script ran, the caller saw an error), cuts, half-opens,
// black-holes and refuses connections mid-run, a few of these faults in
// each scenario. Every call that failed is
// pending, and the check holds. Run with -redis.scenarios=50 for the
// acceptance level.
func TestLinearizableThroughNetworkFaults(t *testing.T) {
	s := startServer(t)
	p := newFaultProxy(t, s.addr())
	n := 0
	pending := checkScenarios(t, "network", *scenarios, func(sc linearizability.Scenario, newClient func(redisbudget.Config) (netBudget, error)) model.History {
		n++
		return record(t, proxyRig(t, s, p), sc, networkFaults(p, n-1), newClient)
	})
	st := p.stats()
	t.Logf("the proxy dropped %d replies and refused %d connections; %d pending calls", st.droppedReplies, st.refused, pending)
	if st.droppedReplies == 0 || st.refused == 0 || pending == 0 {
		t.Errorf("no reply was lost (%d), no connection refused (%d) or no call failed (%d): the faults did not happen mid-run", st.droppedReplies, st.refused, pending)
	}
}

// Recording the calls whose reply was lost as denials, as a caller that
// takes an error for a "no" would, is caught: their charge happened.
func TestLostRepliesTakenAsDenialsAreCaught(t *testing.T) {
	s := startServer(t)
	p := newFaultProxy(t, s.addr())
	m := netBucket
	tm := seqcheck.TokenBucketTiming(m)
	tm.Forward = true
	for seed := range uint64(20) {
		sc := scenario(seed+1, 13, tm)
		h := record(t, proxyRig(t, s, p), sc, func(*recording) {
			p.setDropReplies(true)
			time.Sleep(100 * time.Millisecond)
			p.setDropReplies(false)
		}, func(c redisbudget.Config) (netBudget, error) { return tokenBucketClient(m, c) })
		for i := range h {
			if h[i].Pending && h[i].Client <= len(sc.Goroutines) {
				h[i].Pending, h[i].Granted = false, false
			}
		}
		if r := linearizability.Check(m, h, 60*time.Second); r.Verdict == linearizability.Violation {
			t.Logf("scenario %d: a lost reply taken as a denial is a violation:\n%s", seed+1, r.Explain())
			return
		}
	}
	t.Fatal("20 runs with lost replies taken as denials showed no violation")
}

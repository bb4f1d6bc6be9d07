package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
)

// Config describes one simulated outage.
type Config struct {
	Clients   int     // clients, each with its own budget; 0 means 50
	Rate      float64 // requests per second per client; 0 means 10
	Attempts  int     // attempts per request, the first included; 0 means 3
	BaseDelay time.Duration
	MaxDelay  time.Duration // the Retrier's backoff; 0 means 50ms and 2s (those of the article "Retry budget in TypeScript")
	// The script: Healthy, then Outage at ErrorRate, then Recovery. Zero
	// durations mean 20s, 60s and 20s; ErrorRate is a fraction in [0, 1].
	Healthy, Outage, Recovery time.Duration
	ErrorRate                 float64
	// AttemptTime is how long every attempt takes, failed or not (rounded
	// to the request's own instants, as every wait of the simulation is).
	// Zero means none: an attempt answers at once, and no call is ever in
	// flight long enough for a budget that counts work in flight
	// (budget.InFlightBudget) to limit it. An outage of timeouts has long
	// attempts.
	AttemptTime time.Duration
	// NewBudget builds one client's budget on clock, which reads the
	// simulation's virtual time. Nil means no budget.
	NewBudget func(clock budget.Clock) budget.Budget `json:"-"`
	// Outside, if set, keeps the budgets out of the bubble altogether:
	// for budgets whose state is in another process (a Redis server). They
	// are built before the bubble and closed after it, and every call on
	// them is made by a goroutine outside the bubble while the caller
	// inside waits, so that the budget's connections, timers and pools
	// never belong to the bubble (a timer made in a bubble and reused
	// outside it is a fatal error), and its goroutines never keep the
	// bubble's clock still. Their clock reads the simulation's virtual
	// time as of the call being made, and zero before the first.
	Outside bool `json:"-"`
	Seed    uint64
}

func (c Config) withDefaults() Config {
	if c.Clients <= 0 {
		c.Clients = 50
	}
	if c.Rate <= 0 {
		c.Rate = 10
	}
	if c.Attempts <= 0 {
		c.Attempts = 3
	}
	if c.BaseDelay <= 0 {
		c.BaseDelay = 50 * time.Millisecond
	}
	if c.MaxDelay <= 0 {
		c.MaxDelay = 2 * time.Second
	}
	if c.Healthy <= 0 {
		c.Healthy = 20 * time.Second
	}
	if c.Outage <= 0 {
		c.Outage = 60 * time.Second
	}
	if c.Recovery <= 0 {
		c.Recovery = 20 * time.Second
	}
	return c
}

// Second is what the dependency saw in one second of virtual time.
type Second struct {
	Attempts, FirstAttempts int
	Granted, Denied         int // retries the budgets granted and denied
	Succeeded, Failed       int // requests that ended in this second, by outcome
}

// Result is what a run measured.
type Result struct {
	Config  Config
	Seconds []Second
	// Over the outage: attempts ÷ first attempts, and retries denied.
	Amplification float64
	Denied        int
	Granted       int
	// The share of requests started during recovery that succeeded.
	RecoverySuccess float64
}

// grid spaces every instant at which a goroutine of the simulation wakes:
// request r wakes only at instants ≡ r (mod grid), and arrivals happen at
// multiples of grid, so no two goroutines ever wake together and the run is
// deterministic. It is about a millisecond.
const grid = 1 << 20

// Run simulates the outage in a testing/synctest bubble of t and returns
// the measurements. Each client's budget is built inside the bubble and
// closed there at the end, if it has a Close() error method, unless
// c.Outside says otherwise. A panic in a factory or a budget is returned as
// an error (the first one, if several); it never crashes the process.
func Run(t *testing.T, c Config) (Result, error) {
	t.Helper()
	c = c.withDefaults()
	var res Result
	var err error
	var prebuilt []budget.Budget
	var out *outside
	if c.Outside && c.NewBudget != nil {
		out = startOutside()
		defer out.stop()
		factory := harness.Subject[struct{}]{New: c.NewBudget}
		for range c.Clients {
			var b budget.Budget
			var closeBudget func()
			if p := harness.Catch("the outage simulation's factory", func() { b, closeBudget = factory.Open(&out.clock) }); p != nil {
				return res, p
			}
			out.closers = append(out.closers, closeBudget)
			// Guarded here, so that a panic is read where it happened,
			// outside the bubble, with the budget's own lines.
			prebuilt = append(prebuilt, out.wrap(harness.Guarded(b)))
		}
	}
	if p := harness.Catch("the outage simulation", func() {
		synctest.Test(t, func(t *testing.T) {
			if out != nil {
				out.start = time.Now() // the bubble's time, read before any call
			}
			if p := harness.Catch("the outage simulation", func() {
				res, err = run(c, prebuilt)
			}); p != nil {
				err = p
			}
		})
	}); p != nil {
		err = p
	}
	return res, err
}

// outside makes the calls on budgets kept out of the bubble (see
// Config.Outside). Its channels and its goroutine are made before the
// bubble: a goroutine of the bubble that waits on them is not durably
// blocked, so the bubble's clock stands still until the call returns, and
// the simulation's goroutines, which never wake at the same instant, still
// make their calls one at a time.
type outside struct {
	start   time.Time // the simulation's start, in the bubble's time
	clock   setClock
	mu      sync.Mutex // one call at a time, for the one reply channel
	calls   chan outsideCall
	replies chan any // a call's panic, or nil
	done    chan struct{}
	closers []func()
}

type outsideCall struct {
	now time.Duration // the bubble's virtual time since the start
	f   func()
}

func startOutside() *outside {
	o := &outside{calls: make(chan outsideCall), replies: make(chan any), done: make(chan struct{})}
	go func() {
		defer close(o.done)
		for call := range o.calls {
			o.clock.now.Store(int64(call.now))
			o.replies <- func() (p any) {
				defer func() { p = recover() }()
				call.f()
				return nil
			}()
		}
	}()
	return o
}

// stop ends the goroutine and closes the budgets.
func (o *outside) stop() {
	close(o.calls)
	<-o.done
	for _, f := range o.closers {
		f()
	}
}

// do runs f outside the bubble with the clock at now, and re-raises its
// panic, if any, in the caller.
func (o *outside) do(now time.Duration, f func()) {
	o.mu.Lock()
	o.calls <- outsideCall{now: now, f: f}
	p := <-o.replies
	o.mu.Unlock()
	if p != nil {
		panic(p)
	}
}

// wrap returns b with its calls made outside the bubble: a
// budget.InFlightBudget if b is one.
func (o *outside) wrap(b budget.Budget) budget.Budget {
	ob := &outsideBudget{o: o, inner: b}
	if _, ok := b.(budget.InFlightBudget); ok {
		return outsideInFlight{ob}
	}
	return ob
}

// outsideBudget forwards each call to the goroutine outside the bubble,
// with the virtual time since the simulation's start.
type outsideBudget struct {
	o     *outside
	inner budget.Budget
}

func (b *outsideBudget) do(f func()) { b.o.do(time.Since(b.o.start), f) }

func (b *outsideBudget) Request() { b.do(b.inner.Request) }
func (b *outsideBudget) Retry(k budget.Kind) (ok bool) {
	b.do(func() { ok = b.inner.Retry(k) })
	return ok
}
func (b *outsideBudget) Success(k budget.Kind) { b.do(func() { b.inner.Success(k) }) }

type outsideInFlight struct{ *outsideBudget }

func (b outsideInFlight) AttemptEnd(k budget.Kind) {
	b.do(func() { b.inner.(budget.InFlightBudget).AttemptEnd(k) })
}
func (b outsideInFlight) CallEnd() {
	b.do(b.inner.(budget.InFlightBudget).CallEnd)
}

// setClock is the clock of budgets kept out of the bubble: the virtual
// time of the call being made, set before each.
type setClock struct{ now atomic.Int64 }

func (c *setClock) Now() time.Duration { return time.Duration(c.now.Load()) }

type request struct {
	id     int64
	client int
}

func run(c Config, prebuilt []budget.Budget) (Result, error) {
	start := time.Now()
	total := c.Healthy + c.Outage + c.Recovery
	res := Result{Config: c, Seconds: make([]Second, int(total/time.Second)+int(c.MaxDelay/time.Second)*c.Attempts+2)}
	var mu sync.Mutex // the goroutines never run together, but the race detector cannot know that
	at := func() (time.Duration, *Second) {
		d := time.Since(start)
		return d, &res.Seconds[min(int(d/time.Second), len(res.Seconds)-1)]
	}

	budgets := make([]budget.Budget, c.Clients)
	factory := harness.Subject[struct{}]{New: c.NewBudget}
	for i := range budgets {
		if c.NewBudget != nil {
			var b budget.Budget
			if prebuilt != nil {
				b = prebuilt[i]
			} else {
				var closeBudget func()
				b, closeBudget = factory.Open(budget.NewMonotonicClock())
				defer closeBudget()
			}
			cb := &counting{inner: harness.Guarded(b), mu: &mu, at: at}
			budgets[i] = cb
			if _, ok := cb.inner.(budget.InFlightBudget); ok {
				budgets[i] = countingInFlight{cb}
			}
		} else {
			budgets[i] = &counting{inner: unlimited{}, mu: &mu, at: at}
		}
	}
	var fault atomic.Pointer[error]
	failing := func(d time.Duration, r *request, attempt int) bool {
		if d < c.Healthy || d >= c.Healthy+c.Outage {
			return false
		}
		// A coin for this request and attempt alone, so that the outcome
		// does not depend on the order of anything else.
		rng := rand.New(rand.NewPCG(c.Seed^uint64(r.id), uint64(attempt)))
		return rng.Float64() < c.ErrorRate
	}

	// doRequest runs one request through its Retrier.
	doRequest := func(r *request, retrier *budget.Retrier) {
		attempt := 0
		err := retrier.Do(context.Background(), func(context.Context, budget.Attempt) error {
			attempt++
			d, s := at()
			mu.Lock()
			s.Attempts++
			if attempt == 1 {
				s.FirstAttempts++
			}
			mu.Unlock()
			if c.AttemptTime > 0 {
				time.Sleep(onResidue(c.AttemptTime, time.Since(start), r.id))
			}
			if failing(d, r, attempt) {
				return errUnavailable
			}
			return nil
		})
		_, s := at()
		mu.Lock()
		if err == nil {
			s.Succeeded++
		} else {
			s.Failed++
		}
		mu.Unlock()
	}

	// Arrivals keep the configured rate on average, each on a multiple of
	// grid and after the one before.
	interval := float64(time.Second) / (c.Rate * float64(c.Clients))
	var wg sync.WaitGroup
	var id int64
	for arrival := time.Duration(0); arrival < total; {
		time.Sleep(arrival - time.Since(start))
		id++
		r := &request{id: id, client: int(id) % c.Clients}
		rng := rand.New(rand.NewPCG(c.Seed, uint64(id)))
		retrier := &budget.Retrier{
			Budget:      budgets[r.client],
			MaxAttempts: c.Attempts,
			BaseDelay:   c.BaseDelay,
			MaxDelay:    c.MaxDelay,
			Jitter: func(ceiling time.Duration) time.Duration {
				// Full jitter, then down to the next instant of this
				// request's own residue class.
				w := time.Duration(rng.Int64N(int64(ceiling) + 1))
				end := time.Since(start) + w
				w -= time.Duration((int64(end) - r.id%grid + grid) % grid)
				switch {
				case w >= 0:
				case w+grid <= ceiling:
					w += grid
				default:
					w = 0 // no wait at all: the request goes on at once, in its own goroutine
				}
				return w
			},
		}
		wg.Go(func() {
			if err := harness.Catch(fmt.Sprintf("request %d of the outage simulation", r.id), func() { doRequest(r, retrier) }); err != nil {
				fault.CompareAndSwap(nil, &err)
			}
		})
		next := time.Duration(float64(id)*interval) / grid * grid
		arrival = max(next, arrival+grid)
	}
	wg.Wait()
	if err := fault.Load(); err != nil {
		return res, *err
	}
	res.summarize()
	return res, nil
}

var errUnavailable = errors.New("503 service unavailable")

// onResidue returns a duration of at least d, and less than d + grid, that
// ends, from now, on an instant ≡ id (mod grid): the request's own.
func onResidue(d, now time.Duration, id int64) time.Duration {
	end := int64(now + d)
	return d + time.Duration(((id%grid-end)%grid+grid)%grid)
}

func (r *Result) summarize() {
	c := r.Config
	from, to := int(c.Healthy/time.Second), int((c.Healthy+c.Outage)/time.Second)
	var attempts, firsts int
	for i := from; i < to && i < len(r.Seconds); i++ {
		s := r.Seconds[i]
		attempts += s.Attempts
		firsts += s.FirstAttempts
		r.Denied += s.Denied
		r.Granted += s.Granted
	}
	if firsts > 0 {
		r.Amplification = float64(attempts) / float64(firsts)
	}
	// Requests end at most a few waits after they start; count the ends in
	// recovery, after the first MaxDelay × Attempts of it.
	var ok, all int
	for i := to + int(c.MaxDelay/time.Second)*c.Attempts + 1; i < int((c.Healthy+c.Outage+c.Recovery)/time.Second) && i < len(r.Seconds); i++ {
		ok += r.Seconds[i].Succeeded
		all += r.Seconds[i].Succeeded + r.Seconds[i].Failed
	}
	if all > 0 {
		r.RecoverySuccess = float64(ok) / float64(all)
	}
}

// counting wraps a client's budget and counts its answers per second.
type counting struct {
	inner budget.Budget
	mu    *sync.Mutex
	at    func() (time.Duration, *Second)
}

func (c *counting) Request() { c.inner.Request() }
func (c *counting) Retry(k budget.Kind) bool {
	ok := c.inner.Retry(k)
	_, s := c.at()
	c.mu.Lock()
	if ok {
		s.Granted++
	} else {
		s.Denied++
	}
	c.mu.Unlock()
	return ok
}
func (c *counting) Success(k budget.Kind) { c.inner.Success(k) }

// countingInFlight is counting for a budget.InFlightBudget: it passes the
// ends on.
type countingInFlight struct{ *counting }

func (c countingInFlight) AttemptEnd(k budget.Kind) {
	c.inner.(budget.InFlightBudget).AttemptEnd(k)
}
func (c countingInFlight) CallEnd() { c.inner.(budget.InFlightBudget).CallEnd() }

type unlimited struct{}

func (unlimited) Request()               {}
func (unlimited) Retry(budget.Kind) bool { return true }
func (unlimited) Success(budget.Kind)    {}

// String formats the headline numbers.
func (r Result) String() string {
	return fmt.Sprintf("amplification %.3fx, %d retries granted and %d denied during the outage, %.1f%% of recovery requests succeeded",
		r.Amplification, r.Granted, r.Denied, 100*r.RecoverySuccess)
}

package sim_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/sim"
)

func small(newBudget func(budget.Clock) budget.Budget, p float64) sim.Config {
	return sim.Config{Clients: 20, Rate: 10, Healthy: 5 * time.Second, Outage: 30 * time.Second, Recovery: 10 * time.Second,
		ErrorRate: p, NewBudget: newBudget, Seed: 7}
}

func run(t *testing.T, c sim.Config) sim.Result {
	t.Helper()
	r, err := sim.Run(t, c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A budget that panics is an error of Run, not a crash.
func TestPanickingBudgetIsAnError(t *testing.T) {
	_, err := sim.Run(t, small(func(budget.Clock) budget.Budget { return panicky{} }, 1))
	if err == nil || !strings.Contains(err.Error(), "Retry panicked") {
		t.Fatalf("Run with a panicking budget = %v, want an error naming Retry", err)
	}
}

type panicky struct{}

func (panicky) Request()               {}
func (panicky) Retry(budget.Kind) bool { panic("boom") }
func (panicky) Success(budget.Kind)    {}

// A budget that owns a goroutine is built and closed inside the bubble.
func TestClosesBudgets(t *testing.T) {
	var closed atomic.Int32
	newB := func(budget.Clock) budget.Budget { return newOwned(&closed) }
	run(t, small(newB, 1))
	if closed.Load() != 20 {
		t.Errorf("%d budgets closed, want 20", closed.Load())
	}
}

// owned keeps a counter in a goroutine of its own, until Close.
type owned struct {
	req    chan chan bool
	done   chan struct{}
	closed *atomic.Int32
}

func newOwned(closed *atomic.Int32) *owned {
	o := &owned{req: make(chan chan bool), done: make(chan struct{}), closed: closed}
	go func() {
		tokens := 3
		for {
			select {
			case r := <-o.req:
				ok := tokens > 0
				if ok {
					tokens--
				}
				r <- ok
			case <-o.done:
				return
			}
		}
	}()
	return o
}

func (o *owned) Request() {}
func (o *owned) Retry(budget.Kind) bool {
	r := make(chan bool)
	o.req <- r
	return <-r
}
func (o *owned) Success(budget.Kind) {}
func (o *owned) Close() error {
	close(o.done)
	o.closed.Add(1)
	return nil
}

func TestDeterministic(t *testing.T) {
	newBucket := func(c budget.Clock) budget.Budget {
		cfg := budget.DefaultTokenBucketConfig()
		b, _ := budget.NewTokenBucket(cfg)
		return b
	}
	a := run(t, small(newBucket, 0.7))
	b := run(t, small(newBucket, 0.7))
	if a.String() != b.String() {
		t.Fatalf("two runs differ:\n%v\n%v", a, b)
	}
	for i := range a.Seconds {
		if a.Seconds[i] != b.Seconds[i] {
			t.Fatalf("second %d differs: %+v and %+v", i, a.Seconds[i], b.Seconds[i])
		}
	}
	t.Log(a)
}

func TestNoBudgetMatchesOnePlusPPlusPSquared(t *testing.T) {
	for _, p := range []float64{0.3, 0.68, 1} {
		r := run(t, small(nil, p))
		want := 1 + p + p*p
		if d := r.Amplification/want - 1; d > 0.02 || d < -0.02 {
			t.Errorf("p=%v: amplification %.3f, want %.3f within 2%%", p, r.Amplification, want)
		}
		t.Logf("p=%v: %v (1+p+p² = %.3f)", p, r, want)
	}
}

// The published bounds: a 10% ratio stays at 1.1x plus the floor's share,
// floor / requests per client per window.
func TestRatioBound(t *testing.T) {
	newRatio := func(c budget.Clock) budget.Budget {
		cfg := budget.DefaultRatioConfig()
		cfg.Clock = c
		b, err := budget.NewRatio(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, rate := range []float64{10, 1} {
		c := small(newRatio, 1)
		c.Rate = rate
		r := run(t, c)
		perWindow := rate * 10 // requests per client in a 10s window
		floorShare := max(3/perWindow-0.1, 0)
		if bound := 1.1 + floorShare; r.Amplification > bound+1e-9 {
			t.Errorf("rate %v: amplification %.4f, above 1.1 + floor share %.2f", rate, r.Amplification, floorShare)
		}
		t.Logf("rate %v/s per client: %v (bound 1.1 + %.2f)", rate, r, floorShare)
	}
}

// pooled is a budget that keeps timers in a pool shared with code outside
// the simulation, as a network client does (go-redis waits for a pooled
// connection with a pooled timer). A timer made in a testing/synctest
// bubble and reset outside it is a fatal error of the runtime, so Outside
// budgets must make their calls outside the bubble. It also records the
// clock readings its calls see.
type pooled struct {
	clock budget.Clock
	pool  *[]*time.Timer
	seen  *[]time.Duration
}

func (p pooled) call() {
	*p.seen = append(*p.seen, p.clock.Now())
	var tm *time.Timer
	if n := len(*p.pool); n > 0 {
		tm, *p.pool = (*p.pool)[n-1], (*p.pool)[:n-1]
		tm.Reset(time.Hour)
	} else {
		tm = time.NewTimer(time.Hour)
	}
	tm.Stop()
	*p.pool = append(*p.pool, tm)
}

func (p pooled) Request()               { p.call() }
func (p pooled) Retry(budget.Kind) bool { p.call(); return true }
func (p pooled) Success(budget.Kind)    { p.call() }

// Outside budgets are called outside the bubble, on the simulation's
// virtual time: the timers they make can be used after it, and the clock
// they read runs from 0 to the end of the script, never backwards.
func TestOutsideCallsAreMadeOutsideTheBubble(t *testing.T) {
	var pool []*time.Timer
	var seen []time.Duration
	c := small(func(clock budget.Clock) budget.Budget { return pooled{clock: clock, pool: &pool, seen: &seen} }, 0.5)
	c.Outside = true
	run(t, c)
	if len(pool) == 0 {
		t.Fatal("the budgets made no timer")
	}
	for _, tm := range pool { // fatal if a timer belonged to the bubble
		tm.Reset(time.Hour)
		tm.Stop()
	}
	end := c.Healthy + c.Outage + c.Recovery
	for i, d := range seen {
		if d < 0 || d > end+time.Minute || (i > 0 && d < seen[i-1]) {
			t.Fatalf("call %d read %v on the clock (the one before, %v): want virtual time within the script's %v, never going back", i, d, seen[max(i-1, 0)], end)
		}
	}
	if last := seen[len(seen)-1]; last < c.Healthy+c.Outage {
		t.Errorf("the last call read %v, want the virtual time near the script's end (%v)", last, end)
	}
}

// A panic in an Outside budget is an error naming the method, whose stack
// is the budget's own.
func TestOutsidePanicKeepsTheBudgetsStack(t *testing.T) {
	c := small(func(budget.Clock) budget.Budget { return panicky{} }, 1)
	c.Outside = true
	_, err := sim.Run(t, c)
	if err == nil || !strings.Contains(err.Error(), "Retry panicked") {
		t.Fatalf("Run with a panicking Outside budget = %v, want an error naming Retry", err)
	}
	var f *harness.Fault
	if !errors.As(err, &f) || !strings.Contains(f.Stack, "panicky.Retry") {
		t.Errorf("the fault's stack does not hold panicky.Retry: %v", err)
	}
}

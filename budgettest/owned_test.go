package budgettest_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
)

// owned is a correct token bucket whose state belongs to a goroutine of its
// own: every call is a message to it, and Close stops it. It implements
// the model's rule without refill, and reports its balance.
type owned struct {
	calls chan call
	done  chan struct{}
}

type call struct {
	op    model.Op
	reply chan int64
}

func newOwned(m model.TokenBucket) *owned {
	o := &owned{calls: make(chan call), done: make(chan struct{})}
	go func() {
		tokens := m.Capacity
		cost := func(k model.Kind) int64 {
			if k == model.Throttled {
				return m.ThrottledCost
			}
			return m.TransientCost
		}
		for {
			select {
			case c := <-o.calls:
				var out int64
				switch c.op.Op {
				case model.Retry:
					if c.op.Kind.IsRetry() && tokens >= cost(c.op.Kind) {
						tokens -= cost(c.op.Kind)
						out = 1
					}
				case model.Success:
					credit := m.SuccessBonus
					if c.op.Kind.IsRetry() {
						credit = cost(c.op.Kind)
					}
					tokens = min(tokens+credit, m.Capacity)
				case model.Advance: // a balance query
					out = tokens
				}
				c.reply <- out
			case <-o.done:
				return
			}
		}
	}()
	return o
}

// do sends op to the owner and waits for its answer. A call racing Close
// or made after it returns at once, answering 0 (a retry denied), as the
// contract asks: the owner answers every message it took.
func (o *owned) do(op model.Op) int64 {
	r := make(chan int64, 1)
	select {
	case o.calls <- call{op, r}:
		return <-r
	case <-o.done:
		return 0
	}
}

func (o *owned) Request()                 {}
func (o *owned) Retry(k budget.Kind) bool { return o.do(model.OpRetry(model.Kind(k))) == 1 }
func (o *owned) Success(k budget.Kind)    { o.do(model.OpSuccess(model.Kind(k))) }
func (o *owned) Available() float64       { return float64(o.do(model.OpAdvance(0))) / 1000 }
func (o *owned) Close() error             { close(o.done); return nil }

// A correct budget that owns a goroutine passes every check: each check
// closes it where it was built.
func TestGoroutineOwnedBudgetConforms(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{
		Name: "goroutine-owned bucket", Model: bucket, Scenarios: 20,
		New: func(*testing.T, budget.Clock) budget.Budget { return newOwned(bucket) },
	})
}

// The same on the wall clock: every check then runs in a synctest bubble,
// which fails if the goroutine outlives it.
func TestGoroutineOwnedBudgetConformsInBubbles(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{
		Name: "goroutine-owned bucket", Model: bucket, WallClock: true, Scenarios: 10,
		New: func(*testing.T, budget.Clock) budget.Budget { return newOwned(bucket) },
	})
}

// Without Close the goroutine outlives the check: the Leak check says so.
func TestLeakCheckCatchesAnUnclosedGoroutine(t *testing.T) {
	t.Parallel() // each waits out the check's 5 s for a leak to end
	skipUnderRace(t)
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{
		Name: "never closed", Model: bucket, Watchdog: 10 * time.Second,
		New: func(*testing.T, budget.Clock) budget.Budget { return unclosed{newOwned(bucket)} },
	}, budgettest.CheckLeak)
	if err == nil || !contains(err.Error(), "no goroutine the budget started outlives it") {
		t.Fatalf("VerifyCheck(Leak) = %v, want the leak rule", err)
	}
}

// A goroutine that another test starts while the Leak check runs (a
// parallel subtest, or the suite's own child process for another subject)
// is not the budget's: the check passes. The factory has a goroutine that
// was running before the check start one that lives on past it.
func TestLeakCheckIgnoresGoroutinesOfParallelTests(t *testing.T) {
	t.Parallel() // each waits out the check's 5 s for a leak to end
	skipUnderRace(t)
	stop, start := make(chan struct{}), make(chan struct{})
	defer close(stop)
	started := make(chan struct{})
	go func() { // another test's goroutine
		<-start
		go func() { <-stop }()
		close(started)
	}()
	var once sync.Once
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{Name: "correct", Model: bucket,
		New: func(*testing.T, budget.Clock) budget.Budget {
			once.Do(func() { close(start); <-started })
			return seqcheck.NewTokenBucket(bucket)(nil)
		}}, budgettest.CheckLeak)
	if err != nil {
		t.Fatalf("VerifyCheck(Leak) = %v, want nil", err)
	}
	// The same goroutine, started by the budget, is its leak.
	err = budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{Name: "leaks from its factory", Model: bucket,
		New: func(*testing.T, budget.Clock) budget.Budget {
			go func() { <-stop }()
			return seqcheck.NewTokenBucket(bucket)(nil)
		}}, budgettest.CheckLeak)
	if err == nil || !contains(err.Error(), "owned_test.go") {
		t.Fatalf("VerifyCheck(Leak) = %v, want the leak, told in this file's lines", err)
	}
}

// unclosed hides its budget's Close.
type unclosed struct{ o *owned }

func (u unclosed) Request()                 { u.o.Request() }
func (u unclosed) Retry(k budget.Kind) bool { return u.o.Retry(k) }
func (u unclosed) Success(k budget.Kind)    { u.o.Success(k) }

// leaksOnThrottled is the reference bucket, except that its first throttled
// retry starts a goroutine that never ends (a retry timer never stopped).
type leaksOnThrottled struct {
	budget.Budget
	once sync.Once
	stop chan struct{}
}

func (l *leaksOnThrottled) Retry(k budget.Kind) bool {
	if k == budget.Throttled {
		l.once.Do(func() { go func() { <-l.stop }() })
	}
	return l.Budget.Retry(k)
}

// The Leak check calls every kind of retry: a leak behind the throttled
// kind alone is found.
func TestLeakCheckCallsEveryKind(t *testing.T) {
	t.Parallel() // each waits out the check's 5 s for a leak to end
	skipUnderRace(t)
	stop := make(chan struct{})
	defer close(stop)
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{Name: "leaks on a throttled retry", Model: bucket,
		New: func(*testing.T, budget.Clock) budget.Budget {
			return &leaksOnThrottled{Budget: seqcheck.NewTokenBucket(bucket)(nil), stop: stop}
		}}, budgettest.CheckLeak)
	if err == nil || !contains(err.Error(), "no goroutine the budget started outlives it") {
		t.Fatalf("VerifyCheck(Leak) = %v, want the leak rule", err)
	}
}

// stuckAfterClose is owned whose calls wait for the owner even after Close
// stopped it: a call racing Close, or made after it, blocks for ever.
type stuckAfterClose struct{ *owned }

func (s stuckAfterClose) do(op model.Op) int64 {
	r := make(chan int64, 1)
	s.calls <- call{op, r}
	return <-r
}

func (s stuckAfterClose) Retry(k budget.Kind) bool { return s.do(model.OpRetry(model.Kind(k))) == 1 }
func (s stuckAfterClose) Success(k budget.Kind)    { s.do(model.OpSuccess(model.Kind(k))) }

// A budget whose calls block once Close has run fails the Leak check's
// race of calls against Close, which names the rule.
func TestCallsAfterCloseMustReturn(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{
		Name: "stuck after Close", Model: bucket,
		New: func(*testing.T, budget.Clock) budget.Budget { return stuckAfterClose{newOwned(bucket)} },
	}, budgettest.CheckLeak)
	if err == nil {
		t.Fatal("a budget whose calls block after Close passed the Leak check")
	}
	for _, want := range []string{"Closing a budget", "had not returned 10s after Close returned"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the failure lacks %q:\n%v", want, err)
		}
	}
}

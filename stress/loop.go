package stress

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/sched"
)

// Settings configure a loop for one check. An adapter sets its loop's
// corresponding options as closely as the loop allows, and ignores those its
// loop lacks: each check confirms that the situation it needs (its premise)
// happened, and fails with "premise not reached:" when it did not.
type Settings struct {
	MaxAttempts int           // attempts per call, the first included
	BaseDelay   time.Duration // first backoff ceiling
	MaxDelay    time.Duration // cap on one wait, a server-supplied delay included
	MaxElapsed  time.Duration // limit on one call; zero means none

	// NoJitter asks for backoff waits with no random part: the wait before
	// retry n is its ceiling, min(MaxDelay, BaseDelay×2^(n-1)).
	NoJitter bool
	// FixedDelay asks for every backoff wait to be BaseDelay exactly: no
	// growth, no jitter, and a zero BaseDelay means no wait at all rather
	// than a default. A server-supplied delay still replaces the backoff.
	// Checks that need a retry with no wait before it, or a wait that ends
	// at a chosen instant, set it (and NoJitter).
	FixedDelay bool

	// NoAttemptCap asks for a loop with no limit on attempts, the mode many
	// libraries spell Attempts(0) or MaxRetries(-1): it retries until an
	// attempt succeeds or fails permanently, the budget denies a retry, the
	// elapsed limit passes, or the context is done. MaxAttempts is then
	// ignored. The checks that set it set MaxAttempts too, low, so that a
	// loop that ignores NoAttemptCap stops there and the check says so
	// ("premise not reached"); a loop without such a mode may Skip them.
	NoAttemptCap bool

	// HedgeDelay, for a loop that hedges, is how long the attempts in
	// flight run without an answer before the loop starts another beside
	// them; zero means the loop's own delay. A loop that does not hedge
	// ignores it, and Skips the hedging checks.
	HedgeDelay time.Duration
	// HedgeAsksBudget says that a hedge is a retry the budget must grant
	// before it starts (Retry(Transient), charged as a retry is). When
	// false, a loop may hedge without asking; one that asks all the same
	// is granted.
	HedgeAsksBudget bool
}

// The errors the checks' operations return. An adapter maps them onto its
// loop's classification: ErrTransient (and anything wrapping it) is
// retryable; ErrPermanent is not; a *RetryAfterError is retryable after the
// server-supplied delay it carries.
var (
	ErrTransient = errors.New("stress: transient failure")
	ErrPermanent = errors.New("stress: permanent failure")
)

// RetryAfterError is a retryable failure that carries a server-supplied
// delay, like an HTTP 429 or 503 with Retry-After.
type RetryAfterError struct{ Delay time.Duration }

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("stress: throttled, retry after %v", e.Delay)
}

// RetryAfter returns the server-supplied delay.
func (e *RetryAfterError) RetryAfter() time.Duration { return e.Delay }

// A Loop adapts a retry loop to the checks.
type Loop struct {
	Name string
	// Call runs one call of the loop, configured with s: it calls op, and
	// retries it under b as the loop would, until op succeeds or the loop
	// gives up. It returns what the loop returns.
	Call func(ctx context.Context, b budget.Budget, s Settings, op func(context.Context) error) error
	// Skip names checks whose premise the loop cannot meet, with the
	// reason, for example {"MaxElapsedEndsTheLoop": "no elapsed limit"}
	// or {"HedgeLosersCancelled": "does not hedge"}.
	// A skipped check is reported as skipped, with the reason; a check that
	// is not skipped and whose premise does not happen fails. Every key
	// must be the name of a check: budgettest.RunLoop and
	// IsolatedLoopChecks fail on any other.
	Skip map[string]string
}

// A LoopCheck is one check of a retry loop.
type LoopCheck struct {
	Name string
	Rule string // the promise it checks, in words
	Run  func(t *testing.T, l Loop)
}

// LoopChecks returns the checks of a retry loop, in the order they run.
//
// Each check first confirms its premise, the situation in which its rule
// can be broken (a retry with no wait before it, a wait that ends at the
// deadline's instant, a cancel while the loop waits, ...), and fails with a
// message that starts "premise not reached:" when that situation never
// came about, instead of passing for want of a test. A loop that makes
// 1000 attempts at one instant of a bubble's clock, or 100,000 in one call,
// spins: the check stops it and fails within moments.
//
// EveryStartEnds hands the loop a budget.InFlightBudget and checks what it
// is told on each path out of a call; a loop that tells an in-flight
// budget nothing of ends fails it with the reason (such a budget leaks a
// permit on every call), and one that does not support in-flight budgets
// may Skip it with that reason. EveryFailureCounted hands the loop a
// budget.FailureCounter and checks that the failure after which it gives
// up without asking for a retry reaches the budget through Failed; a loop
// that cannot tell a budget of such failures (the AWS SDK's) may Skip it.
func LoopChecks() []LoopCheck {
	return []LoopCheck{
		{"NoAttemptOnDoneContext", "a context that is already done leads to zero attempts", checkDoneContext},
		{"NoAttemptAfterCancel", "a cancel during an attempt leads to no further attempt, even when the retry would come with no wait", checkCancelInAttempt},
		{"NoAttemptOnExpiredDeadline", "no attempt starts on a context whose ctx.Err() is set, even when the wait ends at the deadline's instant (tolerance 2% of 500 trials)", fixedDelayFirst(checkExpiredDeadline)},
		{"GiveUpBeforeDeadline", "a loop whose next wait would reach the deadline returns at once, with no further attempt, instead of waiting into it", fixedDelayFirst(checkGiveUpBeforeDeadline)},
		{"PromptReturnOnCancel", "a cancel during the wait returns at once, with context.Canceled, and no further attempt", checkCancelInWait},
		{"NoGoroutineOutlivesCall", "no goroutine the loop started, and no attempt, outlives the call, whether the operation honours ctx or ignores it, and when a later attempt wins", checkNoLeak},
		{"SharedBudgetRespected", "the budget is asked once per retry, before waiting; granted retries are the only retries; a denied call returns at once", checkSharedBudget},
		{"PermanentNeverRetried", "a permanent error is never retried, and the budget is not asked", checkPermanent},
		{"MaxElapsedEndsTheLoop", "an elapsed limit ends the loop even when attempts take no time", checkMaxElapsed},
		{"ServerDelayCapped", "a server-supplied delay is capped by the maximum delay and by the time left", checkServerDelay},
		{"IgnoringOpEndsTheCall", "when the operation ignores ctx, the loop returns when every attempt it started has finished, with no attempt after the cancel; a loop that hedges waits for its losers", checkIgnoringOp},
		{"EveryStartEnds", "an in-flight budget is told of the end of every attempt the loop started (the first, and every granted retry, even one that never ran), exactly once, after its success and once its operation has returned, and then of the end of the call, before the loop returns, on every path: success, a permanent error, a denial, out of attempts, a cancel during an attempt and during a backoff wait; a loop that hedges ends its losers too", checkEveryStartEnds},
		{"EveryFailureCounted", "a budget that counts failures (budget.FailureCounter) is told of each retryable failure exactly once: through Retry when a retry is asked for after it, else through Failed, when the attempts or the time run out; and of no failure that is not retryable", fixedDelayFirst(checkFailuresCounted)},
		{"EverySuccessReported", "every attempt that succeeds is told to the budget through Success exactly once, before the call returns, with the attempt's kind (first, or the kind of the retry: throttled after a server delay, else transient); no Success for a call in which no attempt succeeded", fixedDelayFirst(checkSuccessesReported)},
		{"HedgeLosersCancelled", "a loop that hedges starts a hedge after HedgeDelay, asks the budget for it when HedgeAsksBudget says so and starts none it denies, and once one attempt wins cancels the others at once and waits for them before it returns; a loop that does not hedge Skips it", fixedDelayFirst(checkHedgeLosersCancelled)},
		{"UncappedLoopEnds", "with no attempt limit (NoAttemptCap), a cancel during the wait still returns at once with context.Canceled, a permanent error is still not retried, and a denial still ends the call; a loop with no such mode Skips it", fixedDelayFirst(checkUncappedLoopEnds)},
	}
}

// checkNames returns the names of the checks, for messages.
func checkNames() []string {
	var names []string
	for _, c := range LoopChecks() {
		names = append(names, c.Name)
	}
	return names
}

// validateSkip returns an error for a loop with no Call, and one naming
// each key of l.Skip that is not the
// name of a check.
func validateSkip(l Loop) error {
	if l.Call == nil {
		return fmt.Errorf("stress: loop %q has a nil Call: set Loop.Call to a function that runs one call of the loop, under the budget and Settings it is given", l.Name)
	}
	var unknown []string
	for k := range l.Skip {
		if !slices.Contains(checkNames(), k) {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return fmt.Errorf("stress: loop %q skips unknown check %s; the checks are %s", l.Name, strings.Join(unknown, ", "), strings.Join(checkNames(), ", "))
}

// spy wraps a budget and counts what one call asks of it.
type spy struct {
	inner budget.Budget

	mu              sync.Mutex
	requests, asks  int
	grants, denials int
}

func (s *spy) Request() {
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
	s.inner.Request()
}

func (s *spy) Retry(k budget.Kind) bool {
	ok := s.inner.Retry(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asks++
	if ok {
		s.grants++
	} else {
		s.denials++
	}
	return ok
}

func (s *spy) Success(k budget.Kind) { s.inner.Success(k) }

// unlimited grants every retry.
type unlimited struct{}

func (unlimited) Request()               {}
func (unlimited) Retry(budget.Kind) bool { return true }
func (unlimited) Success(budget.Kind)    {}

var settings = Settings{MaxAttempts: 3, BaseDelay: 10 * time.Millisecond, MaxDelay: time.Second}

// hiddenDeadline is a context that ends with context.DeadlineExceeded at a
// deadline it does not report: a loop cannot see it coming, so even a loop
// that gives up before a wait that would reach the deadline waits into it.
// It is done from the deadline's instant on, for every look at it (not
// once a timer has run, as context.WithDeadline is): a loop that looks at
// ctx after a wait that ends at the deadline always sees it done.
type hiddenDeadline struct {
	deadline time.Time
	timer    *time.Timer

	mu   sync.Mutex
	done chan struct{}
	err  error
}

func newHiddenDeadline(d time.Duration) (*hiddenDeadline, context.CancelFunc) {
	c := &hiddenDeadline{deadline: time.Now().Add(d), done: make(chan struct{})}
	c.timer = time.AfterFunc(d, func() { c.end(context.DeadlineExceeded) })
	return c, func() { c.timer.Stop(); c.end(context.Canceled) }
}

// end closes done with err, unless it is closed.
func (c *hiddenDeadline) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
}

// expired ends c if its deadline has come, and returns its error.
func (c *hiddenDeadline) expired() error {
	if !time.Now().Before(c.deadline) {
		c.end(context.DeadlineExceeded)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *hiddenDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *hiddenDeadline) Done() <-chan struct{}       { c.expired(); return c.done }
func (c *hiddenDeadline) Err() error                  { return c.expired() }
func (c *hiddenDeadline) Value(any) any               { return nil }

// succeeds returns nil from every attempt.
func succeeds(context.Context, int) error { return nil }

// failsOnce fails the first attempt with err and succeeds after.
func failsOnce(err error) func(context.Context, int) error {
	return func(_ context.Context, n int) error {
		if n == 1 {
			return err
		}
		return nil
	}
}

// retried says how a loop retried in a call without the check's twist:
// after what wait, or not at all.
func retried(l Loop, r *recorder) string {
	if gap, ok := r.gap(); ok {
		return fmt.Sprintf("%s retried %v after the first attempt failed", l.Name, gap)
	}
	return fmt.Sprintf("%s made %d attempts and did not retry", l.Name, r.counts().n)
}

func checkDoneContext(t *testing.T, l Loop) {
	synctest.Test(t, func(t *testing.T) {
		// The premise: the same call on a live context attempts.
		live := newRecorder(t, l, succeeds)
		defer live.drain()
		live.call(context.Background(), &spy{inner: unlimited{}}, settings)
		if live.spinning() {
			return
		}
		if live.counts().n == 0 {
			unmet(t, "an attempt in the same call on a live context", fmt.Sprintf("%s made none", l.Name))
			return
		}

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := newRecorder(t, l, succeeds)
		defer r.drain()
		res := r.call(ctx, &spy{inner: unlimited{}}, settings)
		if r.spinning() {
			return
		}
		if n := r.counts().n; n != 0 {
			t.Errorf("%s made %d attempts on a context that was already cancelled; want none", l.Name, n)
		}
		if !errors.Is(res.err, context.Canceled) {
			t.Errorf("%s returned %v for a cancelled call; want an error wrapping context.Canceled", l.Name, res.err)
		}
	})
}

func checkCancelInAttempt(t *testing.T, l Loop) {
	// The premise is a retry with no wait before it: no select on
	// ctx.Done() stands between the failed attempt and the next, only a
	// look at ctx. FixedDelay with a zero BaseDelay asks for it; for a loop
	// that ignores FixedDelay, a backoff of at most a nanosecond is often
	// zero, and twenty trials reach it whatever the jitter.
	variants := []Settings{
		{MaxAttempts: 3, BaseDelay: 0, MaxDelay: time.Second, FixedDelay: true, NoJitter: true},
		{MaxAttempts: 3, BaseDelay: time.Nanosecond, MaxDelay: time.Second},
	}
	const trials = 20
	calls, retries, atOnce := 0, 0, 0
	shortest := time.Duration(-1)
	for _, s := range variants {
		for trial := range trials {
			synctest.Test(t, func(t *testing.T) {
				// Without the cancel: does the loop retry at once?
				r := newRecorder(t, l, failsOnce(ErrTransient))
				defer r.drain()
				r.call(context.Background(), &spy{inner: unlimited{}}, s)
				calls++
				if gap, ok := r.gap(); ok {
					retries++
					if gap == 0 {
						atOnce++
					}
					if shortest < 0 || gap < shortest {
						shortest = gap
					}
				}
			})
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var r *recorder
				r = newRecorder(t, l, func(context.Context, int) error {
					cancel() // the caller gives up while the attempt runs
					r.mark()
					return ErrTransient
				})
				defer r.drain()
				r.call(ctx, &spy{inner: unlimited{}}, s)
				if n := r.counts().afterMark; n > 0 {
					t.Errorf("trial %d (BaseDelay %v, FixedDelay %v): %s made %d attempts after the caller cancelled during the first; want none", trial, s.BaseDelay, s.FixedDelay, l.Name, n)
				}
			})
		}
	}
	if atOnce == 0 {
		saw := fmt.Sprintf("%s retried in %d of %d calls without the cancel, never at once (the shortest wait %v)", l.Name, retries, calls, shortest)
		if retries == 0 {
			saw = fmt.Sprintf("%s did not retry in any of %d calls without the cancel", l.Name, calls)
		}
		unmet(t, "a retry with no wait before it, in a call without the cancel (Settings.FixedDelay with BaseDelay 0, or a jitter that can pick zero from a BaseDelay of 1ns)", saw)
	}
}

func checkExpiredDeadline(t *testing.T, l Loop) {
	// Only the trials of the hidden deadline count: its context is done
	// for every look from the deadline's instant on, so a loop that looks
	// at ctx before each attempt never attempts on it, on any machine. With
	// context.WithTimeout the context ends when its timer's goroutine has
	// run, which at the deadline's instant races the loop's own timer: a
	// loop that looked and saw it live can attempt as it ends, and under
	// the race detector one that keeps the rule did so in up to 4% of
	// trials, past the 2% once tolerated here. Those trials still reach the
	// premise, and their count is logged.
	const trials, tolerance, enough = 1000, 10, 50 // 2% of the 500 that count: a loop that does not look fails in about half
	bad, reached, racing := 0, 0, 0
	var example string
	for trial := range trials {
		synctest.Test(t, func(t *testing.T) {
			// The server asks for a wait of w before each retry, and the
			// deadline is 2w away: the second wait ends at the deadline's
			// instant, and its timer and the deadline's fire together.
			// Every other trial hides the deadline from the loop (and ends
			// the context at its instant all the same, for every look at
			// it), so that a loop that rightly gives up before a wait that
			// would reach the deadline waits into it.
			w := time.Duration(trial/2+1) * time.Millisecond
			r := newRecorder(t, l, func(context.Context, int) error { return &RetryAfterError{Delay: w} })
			ctx, cancel := context.WithTimeout(context.Background(), 2*w)
			if trial%2 == 1 {
				// The loop gets the hidden deadline itself, not a context
				// derived from it, which a timer would end.
				ctx, cancel = newHiddenDeadline(2 * w)
				r.own = cancel
			}
			defer cancel()
			s := Settings{MaxAttempts: 3, BaseDelay: w, MaxDelay: time.Minute, FixedDelay: true, NoJitter: true}
			defer r.drain()
			res := r.call(ctx, &spy{inner: unlimited{}}, s)
			if r.spinning() {
				return
			}
			// The rule is about ctx.Err(): a loop that looks at ctx before
			// every attempt keeps it, even when it attempts at the
			// deadline's instant before the context's own timer has run.
			// Giving up before such a wait is a promise of its own,
			// GiveUpBeforeDeadline.
			if r.counts().onDone > 0 {
				if trial%2 == 1 {
					bad++
				} else {
					racing++
				}
			}
			// The premise: the loop honoured the first wait to the
			// nanosecond, and was still waiting when the deadline came.
			a := r.list()
			deadline := r.began.Add(2 * w)
			exact := len(a) >= 2 && a[1].start.Sub(r.began) == w
			waited := len(a) == 2 && !res.at.Before(deadline) || len(a) >= 3 && !a[2].start.Before(deadline)
			if exact && waited {
				reached++
			}
			if trial == 1 {
				example = fmt.Sprintf("with a server delay of %v and the deadline %v away, %d attempts", w, 2*w, len(a))
				if len(a) >= 2 {
					example += fmt.Sprintf(", the second %v in", a[1].start.Sub(r.began))
				}
				example += fmt.Sprintf(", and the call returned %v in", res.at.Sub(r.began))
			}
		})
	}
	if bad > tolerance {
		t.Errorf("%s attempted on an expired context in %d of the %d trials whose context is done for every look from its deadline on; want at most %d", l.Name, bad, trials/2, tolerance)
	} else if reached < enough {
		unmet(t, fmt.Sprintf("in at least %d of %d trials, a wait that ends at the deadline's instant: a server delay (or, with Settings.FixedDelay, BaseDelay) honoured to the nanosecond, and the loop still waiting when the deadline comes", enough, trials),
			fmt.Sprintf("%d trials; in one, %s", reached, example))
	} else if bad > 0 {
		t.Logf("%s attempted on an expired context in %d of %d trials (tolerated)", l.Name, bad, trials/2)
	}
	if racing > 0 {
		t.Logf("%s attempted as a context.WithTimeout ended in %d of %d trials (not counted: its timer can fire between the loop's look at ctx and the attempt)", l.Name, racing, trials/2)
	}
}

func checkGiveUpBeforeDeadline(t *testing.T, l Loop) {
	for _, ahead := range []time.Duration{0, time.Second} {
		// The server asks for a wait that ends at the deadline, or a second
		// past it: the loop knows now that no retry can happen in time.
		const left = 3 * time.Second
		s := Settings{MaxAttempts: 3, BaseDelay: left + ahead, MaxDelay: time.Minute, FixedDelay: true, NoJitter: true}
		// The premise: without a deadline, the loop waits as long as the
		// server asks; with it, the wait it would begin reaches the
		// deadline.
		var saw string
		reached := false
		synctest.Test(t, func(t *testing.T) {
			r := newRecorder(t, l, failsOnce(&RetryAfterError{Delay: left + ahead}))
			defer r.drain()
			r.call(context.Background(), &spy{inner: unlimited{}}, s)
			gap, ok := r.gap()
			reached, saw = ok && gap >= left, retried(l, r)
		})
		if !reached {
			unmet(t, fmt.Sprintf("a wait that would reach the deadline: in a call without one, a retry no sooner than %v (the time the check leaves) after a server delay of %v", left, left+ahead), saw)
			continue
		}
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), left)
			defer cancel()
			r := newRecorder(t, l, func(context.Context, int) error { return &RetryAfterError{Delay: left + ahead} })
			defer r.drain()
			res := r.call(ctx, &spy{inner: unlimited{}}, s)
			if r.spinning() {
				return
			}
			if n, took := r.counts().n, res.at.Sub(r.began); n != 1 || took >= left {
				t.Errorf("%s, told to wait %v with %v left: %d attempts, returned after %v; want 1 attempt and a return before the deadline", l.Name, left+ahead, left, n, took)
			}
		})
	}
}

func checkCancelInWait(t *testing.T, l Loop) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := Settings{MaxAttempts: 3, BaseDelay: time.Hour, MaxDelay: 2 * time.Hour}
		r := newRecorder(t, l, func(context.Context, int) error { return &RetryAfterError{Delay: time.Hour} })
		defer r.drain()
		done := r.start(ctx, &spy{inner: unlimited{}}, s)
		time.Sleep(time.Millisecond) // the first attempt has failed; the loop waits
		synctest.Wait()
		// The premise: the loop is waiting, between attempts.
		const expected = "a loop waiting to retry when the caller cancels, 1ms into a call whose first attempt failed at once with a server delay of 1h"
		c := r.counts()
		select {
		case res := <-done:
			if !r.spinning() {
				unmet(t, expected, fmt.Sprintf("%s had returned, after %d attempts, with %v", l.Name, c.n, res.err))
			}
			return
		default:
		}
		if c.n == 0 || c.running > 0 {
			unmet(t, expected, fmt.Sprintf("%s had made %d attempts, and %d still ran", l.Name, c.n, c.running))
			return
		}
		cancelled := time.Now()
		r.mark()
		cancel()
		res := <-done
		if r.spinning() {
			return
		}
		if d := res.at.Sub(cancelled); d > 0 {
			t.Errorf("%s returned %v after a cancel during its wait; want at once", l.Name, d)
		}
		if !errors.Is(res.err, context.Canceled) {
			t.Errorf("%s returned %v after a cancel during its wait; want an error wrapping context.Canceled", l.Name, res.err)
		}
		if n := r.counts().afterMark; n > 0 {
			t.Errorf("%s made %d attempts after the cancel; want none", l.Name, n)
		}
	})
}

// checkNoLeak runs in real time, outside any bubble, and looks for the
// goroutines the call started still running once it has returned.
func checkNoLeak(t *testing.T, l Loop) {
	cases := []struct {
		name string
		// cancel, if set, has the call cancelled 10ms into its first
		// attempt; cancelled is closed once it is.
		cancel bool
		op     func(ctx context.Context, n int, cancelled <-chan struct{}) error
		// long, if set, makes every wait an hour, so that the cancel
		// comes during the first backoff wait.
		long bool
	}{
		{"SucceedsOnSecondAttempt", false, func(ctx context.Context, n int, _ <-chan struct{}) error {
			return failsOnce(ErrTransient)(ctx, n)
		}, false},
		// The operations wait through yield's hooks, which are the plain
		// operations outside a controlled run, so that under control the
		// loop's other goroutines run while an attempt waits.
		{"HonoursCtxAndIsCancelled", true, func(ctx context.Context, n int, _ <-chan struct{}) error {
			if sched.Hook.Select(false, sched.R(ctx.Done()), sched.R(time.After(time.Second))) == 0 {
				return ctx.Err()
			}
			return ErrTransient
		}, false},
		{"IgnoresCtxAndIsCancelled", true, func(ctx context.Context, n int, cancelled <-chan struct{}) error {
			sched.Hook.Sleep(30 * time.Millisecond) // ignores ctx
			sched.Recv(cancelled)                   // and ends after the cancel, however late its timer
			return ErrTransient
		}, false},
		// A loop that hedges starts another attempt while the first runs;
		// the second wins, and the first, the loser, takes a while to
		// wind down once cancelled. A loop that returns without waiting
		// for it leaves it running.
		{"LaterAttemptWins", false, func(ctx context.Context, n int, _ <-chan struct{}) error {
			if n > 1 {
				return nil
			}
			if sched.Hook.Select(false, sched.R(ctx.Done()), sched.R(time.After(100*time.Millisecond))) == 0 {
				sched.Hook.Sleep(20 * time.Millisecond)
				return ctx.Err()
			}
			return ErrTransient
		}, false},
	}
	// A timer or backoff goroutine must stop with the wait it serves:
	// the first attempt fails at once, and the cancel comes 10ms into an
	// hour's wait.
	cases = append(cases, struct {
		name   string
		cancel bool
		op     func(ctx context.Context, n int, cancelled <-chan struct{}) error
		long   bool
	}{"CancelledDuringBackoff", true, func(context.Context, int, <-chan struct{}) error { return ErrTransient }, true})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, ctl := range schedules(l.Name + "/NoGoroutineOutlivesCall/" + tc.name) {
				s := Settings{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
				if tc.long {
					s = Settings{MaxAttempts: 3, BaseDelay: time.Hour, MaxDelay: time.Hour, FixedDelay: true, NoJitter: true}
				}
				if !noLeakCase(t, l, tc.cancel, tc.op, s, ctl, k) {
					return
				}
			}
		})
	}
}

// noLeakCase runs one case of NoGoroutineOutlivesCall (the k-th run of
// it, under ctl when that is set) and reports whether it passed. The case
// has the call cancelled 10ms into its first attempt if cancelAt10ms.
func noLeakCase(t *testing.T, l Loop, cancelAt10ms bool, op func(ctx context.Context, n int, cancelled <-chan struct{}) error, s Settings, ctl *sched.Options, k int) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var returned, during atomic.Bool
	var timer atomic.Pointer[time.Timer]
	defer func() {
		if tm := timer.Load(); tm != nil {
			tm.Stop()
		}
	}()
	cancelled := make(chan struct{})
	var r *recorder
	r = newRecorder(t, l, func(ctx context.Context, n int) error {
		if cancelAt10ms && n == 1 {
			timer.Store(time.AfterFunc(10*time.Millisecond, func() {
				during.Store(!returned.Load())
				cancel()
				r.mark()
				close(cancelled)
			}))
		}
		return op(ctx, n, cancelled)
	})
	r.ctl = ctl
	// The call's goroutines, and theirs, carry a label of their own: a
	// goroutine that a test running in parallel starts is not the loop's.
	var res result
	lineage := harness.Descend(func() { res = r.call(ctx, &spy{inner: unlimited{}}, s) })
	returned.Store(true)
	if fellBackRun(t, k, r) {
		cancel()
		r.drain() // the attempts end; the free run ignores what else is left
		return noLeakCase(t, l, cancelAt10ms, op, s, nil, k)
	}
	defer explainRun(t, k, r)
	if r.spinning() {
		r.release()
		return false
	}
	c := r.counts()
	if res.running > 0 {
		t.Errorf("%s returned while %d attempt(s) still ran: the goroutine running it outlives the call", l.Name, res.running)
	}
	// The call has returned. Everything it started must be gone; a
	// goroutine that was told to stop may take a moment to.
	leak := lineage.Gone(harness.GoneWait)
	r.release() // now release anything that waits on ctx
	cancel()
	if leak != nil {
		t.Errorf("%s left goroutines running after the call returned: %v", l.Name, leak)
	}
	// The premise: the loop attempted, and the cancel came while
	// the call ran.
	switch {
	case c.n == 0:
		unmet(t, "an attempt", fmt.Sprintf("%s made none", l.Name))
	case cancelAt10ms && !during.Load():
		unmet(t, "a cancel while the call runs, 10ms into its first attempt", fmt.Sprintf("%s had returned first, after %d attempts", l.Name, c.n))
	case c.peak > 1 && k == 0:
		t.Logf("%s ran up to %d attempts at once", l.Name, c.peak)
	}
	return !t.Failed()
}

func checkSharedBudget(t *testing.T, l Loop) {
	eachSchedule(t, l.Name+"/SharedBudgetRespected", func(t *testing.T, ctl *sched.Options, k int) bool {
		shared, err := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 5, TransientCost: 1, ThrottledCost: 1})
		if err != nil {
			t.Fatal(err)
		}
		const calls = 20
		type outcome struct {
			spy      *spy
			attempts int
			lastFail time.Time
			returned time.Time
			spun     bool
		}
		outcomes := make([]outcome, calls)
		recs := make([]*recorder, calls)
		results := make([]result, calls)
		spies := make([]*spy, calls)
		fs := make([]func(), calls)
		for i := range calls {
			spies[i] = &spy{inner: shared}
			recs[i] = newRecorder(t, l, func(context.Context, int) error { return ErrTransient })
			defer recs[i].drain()
			fs[i] = func() {
				s := Settings{MaxAttempts: 4, BaseDelay: 10 * time.Millisecond, MaxDelay: time.Second}
				recs[i].callHere(context.Background(), spies[i], s, &results[i])
			}
		}
		// The calls run at once: as goroutines, or as the goroutines of
		// one controlled run.
		rep := controlled(ctl, fs...)
		if ctl != nil {
			if fellBack(t, k, rep) {
				return false
			}
			defer func() { explain(t, k, rep) }()
		}
		for i, r := range recs {
			o := outcome{spy: spies[i], returned: results[i].at, spun: r.spinning()}
			for _, a := range r.list() {
				o.attempts++
				if a.end.After(o.lastFail) {
					o.lastFail = a.end
				}
			}
			outcomes[i] = o
		}
		grants, denials, asks := 0, 0, 0
		for i, o := range outcomes {
			if o.spun {
				return true
			}
			sp := o.spy
			grants += sp.grants
			denials += sp.denials
			asks += sp.asks
			if retries := o.attempts - 1; retries != sp.grants {
				t.Errorf("call %d: %d retries but %d granted by the budget; every retry must be granted first, once", i, retries, sp.grants)
			}
			if sp.asks != sp.grants+sp.denials || sp.denials > 1 {
				t.Errorf("call %d: asked %d times for %d grants and %d denials; want one ask per retry and at most one denial", i, sp.asks, sp.grants, sp.denials)
			}
			// Whether a denied call returned at once is judged freely
			// only. Under control a call that is ready to return waits
			// for the baton while another goroutine holds it, and if that
			// one sleeps in code that is not rewritten (a timer of the
			// loop's library), the bubble's clock moves meanwhile: the
			// time between its last attempt and its return is then the
			// other's sleep, not its own. The free run, which the parent
			// makes first, judges it.
			if ctl == nil && sp.denials == 1 && !o.returned.Equal(o.lastFail) {
				t.Errorf("call %d: denied, yet returned %v after its last attempt failed; a denied call must return at once, without waiting", i, o.returned.Sub(o.lastFail))
			}
			if sp.requests != 1 {
				t.Errorf("call %d: %d requests reported to the budget; want 1", i, sp.requests)
			}
		}
		if grants > 5 {
			t.Errorf("%d retries granted from a budget of 5", grants)
		}
		// The premise: the budget granted retries, and then denied them.
		if grants == 0 || denials == 0 {
			unmet(t, fmt.Sprintf("retries granted by the shared budget of 5 and, once it is spent, denied, in %d calls that always fail, with MaxAttempts 4", calls),
				fmt.Sprintf("%s asked %d times, for %d grants and %d denials", l.Name, asks, grants, denials))
		}
		return true
	})
}

func checkPermanent(t *testing.T, l Loop) {
	synctest.Test(t, func(t *testing.T) {
		// The premise: the loop retries a transient error in the same call.
		control := newRecorder(t, l, failsOnce(ErrTransient))
		defer control.drain()
		control.call(context.Background(), &spy{inner: unlimited{}}, settings)
		if control.spinning() {
			return
		}
		if _, ok := control.gap(); !ok {
			unmet(t, "a retry of a transient error, in the same call", retried(l, control))
			return
		}

		sp := &spy{inner: unlimited{}}
		r := newRecorder(t, l, func(context.Context, int) error { return fmt.Errorf("400 bad request: %w", ErrPermanent) })
		defer r.drain()
		res := r.call(context.Background(), sp, settings)
		if r.spinning() {
			return
		}
		if n := r.counts().n; n != 1 || sp.asks != 0 {
			t.Errorf("%s made %d attempts and asked the budget %d times for a permanent error; want 1 and 0", l.Name, n, sp.asks)
		}
		if !errors.Is(res.err, ErrPermanent) {
			t.Errorf("%s returned %v; want the permanent error", l.Name, res.err)
		}
	})
}

func checkMaxElapsed(t *testing.T, l Loop) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 5 * time.Second
		s := Settings{MaxAttempts: 1 << 30, BaseDelay: 10 * time.Millisecond, MaxDelay: time.Second, MaxElapsed: limit, NoJitter: true}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := newRecorder(t, l, func(context.Context, int) error { return ErrTransient })
		defer r.drain()
		done := r.start(ctx, &spy{inner: unlimited{}}, s)
		var res result
		select {
		case res = <-done:
		case <-time.After(time.Hour):
			cancel() // stop the loop, so that the bubble can end
			<-done
			t.Fatalf("%s still retrying an hour into a call with MaxElapsed %v (%d attempts, each failing at once); want the call ended by MaxElapsed. "+
				"If the loop has no elapsed-time limit, its adapter ignores MaxElapsed, as Settings allows: add MaxElapsedEndsTheLoop to Loop.Skip with the reason",
				l.Name, limit, r.counts().n)
		}
		if r.spinning() {
			return
		}
		a := r.list()
		if len(a) > 0 {
			if d := a[len(a)-1].start.Sub(r.began); d > limit {
				t.Errorf("%s attempted %v after the call started; want no attempt after MaxElapsed %v", l.Name, d, limit)
			}
		}
		took := res.at.Sub(r.began)
		if took > limit+s.MaxDelay {
			t.Errorf("%s returned %v after the call started; want within MaxElapsed %v plus one wait", l.Name, took, limit)
		}
		// The premise: the loop went on until the limit ended it, that is
		// until its next wait, at most MaxDelay, would pass the limit.
		if took < limit-s.MaxDelay {
			unmet(t, fmt.Sprintf("the elapsed limit reached: a call whose attempts all fail at once, with MaxAttempts 1<<30, retrying until its next wait (at most MaxDelay %v) would pass MaxElapsed %v", s.MaxDelay, limit),
				fmt.Sprintf("%s returned after %v and %d attempts, with %v", l.Name, took, len(a), res.err))
		}
	})
}

func checkServerDelay(t *testing.T, l Loop) {
	// The premise: the loop honours a server delay within its caps.
	const delay = 500 * time.Millisecond
	var saw string
	reached := false
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t, l, failsOnce(&RetryAfterError{Delay: delay}))
		defer r.drain()
		r.call(context.Background(), &spy{inner: unlimited{}}, Settings{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Second})
		gap, ok := r.gap()
		reached, saw = ok && gap >= delay, retried(l, r)
	})
	if !reached {
		unmet(t, fmt.Sprintf("a server delay honoured: a retry no sooner than a server delay of %v, with BaseDelay 1ms and MaxDelay 2s", delay), saw)
		return
	}
	t.Run("CappedByMaxDelay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := Settings{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Second}
			r := newRecorder(t, l, failsOnce(&RetryAfterError{Delay: time.Hour}))
			defer r.drain()
			r.call(context.Background(), &spy{inner: unlimited{}}, s)
			if gap, ok := r.gap(); ok && gap > s.MaxDelay {
				t.Errorf("%s waited %v for a server delay of 1h; want at most MaxDelay %v", l.Name, gap, s.MaxDelay)
			}
		})
	})
	t.Run("CappedByTimeLeft", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			s := Settings{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Minute}
			r := newRecorder(t, l, func(context.Context, int) error { return &RetryAfterError{Delay: 10 * time.Second} })
			defer r.drain()
			res := r.call(ctx, &spy{inner: unlimited{}}, s)
			if r.spinning() {
				return
			}
			if d := res.at.Sub(r.began); d > 3*time.Second {
				t.Errorf("%s returned %v after the call started with 3s left and a 10s server delay; want no wait past the deadline", l.Name, d)
			}
			if n := r.counts().n; n != 1 {
				t.Errorf("%s made %d attempts; want 1", l.Name, n)
			}
		})
	})
}

func checkIgnoringOp(t *testing.T, l Loop) {
	t.Run("CancelledDuringAttempt", func(t *testing.T) {
		eachSchedule(t, l.Name+"/IgnoringOpEndsTheCall/CancelledDuringAttempt", func(t *testing.T, ctl *sched.Options, k int) bool {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := newRecorder(t, l, func(context.Context, int) error {
				sched.Hook.Sleep(time.Second) // ignores ctx
				return ErrTransient
			})
			r.ctl = ctl
			defer r.drain()
			defer explainRun(t, k, r)
			done := r.start(ctx, &spy{inner: unlimited{}}, settings)
			time.Sleep(100 * time.Millisecond)
			// The premise: an attempt runs when the caller cancels.
			if c := r.counts(); c.running == 0 {
				if ctl != nil {
					// Under control, first learn whether the run fell
					// back, which would have moved the clock.
					cancel()
					if _, ok := r.within(t, done, callLimit, k); !ok || fellBackRun(t, k, r) {
						return !ok
					}
				}
				if !r.spinning() {
					unmet(t, "an attempt running when the caller cancels, 100ms into a call whose attempts take 1s", fmt.Sprintf("%s had made %d attempts, none running", l.Name, c.n))
				}
				return true
			}
			r.mark()
			cancel()
			res, ok := r.within(t, done, callLimit, k)
			if ok && fellBackRun(t, k, r) {
				return false
			}
			if !ok || r.spinning() {
				return true
			}
			if res.running > 0 {
				t.Errorf("%s returned while %d of its attempts still ran: the operation outlived the call", l.Name, res.running)
			}
			if n := r.counts().afterMark; n > 0 {
				t.Errorf("%s made %d attempts after the cancel; want none", l.Name, n)
			}
			return true
		})
	})
	t.Run("LaterAttemptWins", func(t *testing.T) {
		eachSchedule(t, l.Name+"/IgnoringOpEndsTheCall/LaterAttemptWins", func(t *testing.T, ctl *sched.Options, k int) bool {
			// The first attempt ignores ctx and takes a second; any other
			// succeeds at once. A loop that hedges starts one while the
			// first runs, and must wait for the first, its loser, before
			// it returns; a loop that does not hedges retries after it.
			r := newRecorder(t, l, func(_ context.Context, n int) error {
				if n == 1 {
					sched.Hook.Sleep(time.Second)
					return ErrTransient
				}
				return nil
			})
			r.ctl = ctl
			defer r.drain()
			defer explainRun(t, k, r)
			res, ok := r.within(t, r.start(context.Background(), &spy{inner: unlimited{}}, settings), callLimit, k)
			if ok && fellBackRun(t, k, r) {
				return false
			}
			if !ok || r.spinning() {
				return true
			}
			if res.running > 0 {
				t.Errorf("%s returned while %d earlier attempt(s) still ran: a loop that hedges must cancel its losers and wait for them before it returns", l.Name, res.running)
			}
			if c := r.counts(); c.peak > 1 && k == 0 {
				t.Logf("%s ran up to %d attempts at once", l.Name, c.peak)
			}
			return true
		})
	})
}

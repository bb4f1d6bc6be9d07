package stress

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/retrybudget/retrybudget/budget"
)

// Settings configure a loop for one check. An adapter sets its loop's
// corresponding options as closely as the loop allows.
type Settings struct {
	MaxAttempts int           // attempts per call, the first included
	BaseDelay   time.Duration // first backoff ceiling
	MaxDelay    time.Duration // cap on one wait, a server-supplied delay included
	MaxElapsed  time.Duration // limit on one call; zero means none
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
	// reason, for example {"MaxElapsedEndsTheLoop": "no elapsed limit"}.
	Skip map[string]string
}

// A LoopCheck is one check of a retry loop.
type LoopCheck struct {
	Name string
	Rule string // the promise it checks, in words
	Run  func(t *testing.T, l Loop)
}

// LoopChecks returns the checks of a retry loop, in the order they run.
func LoopChecks() []LoopCheck {
	return []LoopCheck{
		{"NoAttemptOnDoneContext", "a context that is already done leads to zero attempts", checkDoneContext},
		{"NoAttemptAfterCancel", "a cancel during an attempt leads to no further attempt, even with no delay", checkCancelInAttempt},
		{"NoAttemptOnExpiredDeadline", "no attempt starts on a context whose ctx.Err() is set, even when the wait ends at the deadline's instant (tolerance 2% of 1000 trials)", checkExpiredDeadline},
		{"GiveUpBeforeDeadline", "a loop whose next wait would reach the deadline returns at once, with no further attempt, instead of waiting into it", checkGiveUpBeforeDeadline},
		{"PromptReturnOnCancel", "a cancel during the wait returns at once, with context.Canceled, and no further attempt", checkCancelInWait},
		{"NoGoroutineOutlivesCall", "no goroutine the loop started outlives the call, whether the operation honours ctx or ignores it", checkNoLeak},
		{"SharedBudgetRespected", "the budget is asked once per retry, before waiting; granted retries are the only retries; a denied call returns at once", checkSharedBudget},
		{"PermanentNeverRetried", "a permanent error is never retried, and the budget is not asked", checkPermanent},
		{"MaxElapsedEndsTheLoop", "an elapsed limit ends the loop even when attempts take no time", checkMaxElapsed},
		{"ServerDelayCapped", "a server-supplied delay is capped by the maximum delay and by the time left", checkServerDelay},
		{"IgnoringOpEndsTheCall", "when the operation ignores ctx, the loop returns when it finishes, with no further attempt", checkIgnoringOp},
	}
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

// counter counts attempts and notes whether any ran on a done context.
type counter struct {
	n        atomic.Int32
	onDone   atomic.Int32
	lastFail atomic.Int64 // virtual time of the last failed attempt's end, in ns since the epoch
}

func (c *counter) op(fail func(ctx context.Context, n int32) error) func(context.Context) error {
	return func(ctx context.Context) error {
		n := c.n.Add(1)
		if ctx.Err() != nil {
			c.onDone.Add(1)
		}
		err := fail(ctx, n)
		if err != nil {
			c.lastFail.Store(time.Now().UnixNano())
		}
		return err
	}
}

func checkDoneContext(t *testing.T, l Loop) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var c counter
		err := l.Call(ctx, &spy{inner: unlimited{}}, settings, c.op(func(context.Context, int32) error { return nil }))
		if n := c.n.Load(); n != 0 {
			t.Errorf("%s made %d attempts on a context that was already cancelled; want none", l.Name, n)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s returned %v for a cancelled call; want an error wrapping context.Canceled", l.Name, err)
		}
	})
}

func checkCancelInAttempt(t *testing.T, l Loop) {
	// A backoff of at most a nanosecond is often zero: twenty trials reach
	// the no-wait path whatever the loop's jitter.
	for trial := range 20 {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var c counter
			s := settings
			s.BaseDelay = time.Nanosecond
			l.Call(ctx, &spy{inner: unlimited{}}, s, c.op(func(context.Context, int32) error {
				cancel() // the caller gives up while the attempt runs
				return ErrTransient
			}))
			if n := c.n.Load(); n != 1 {
				t.Errorf("trial %d: %s made %d attempts after the caller cancelled during the first; want 1", trial, l.Name, n)
			}
		})
	}
}

func checkExpiredDeadline(t *testing.T, l Loop) {
	const trials, tolerance = 1000, 20 // 2%: enough trials that a loop at 4-5% cannot pass by luck
	bad := 0
	for trial := range trials {
		synctest.Test(t, func(t *testing.T) {
			// The first attempt asks for a wait that ends exactly at the
			// deadline: the wait's timer and the deadline fire at one
			// instant.
			wait := time.Duration(trial+1) * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			late := false
			s := settings
			s.MaxDelay = time.Minute
			first := true
			l.Call(ctx, &spy{inner: unlimited{}}, s, func(ctx context.Context) error {
				// The rule is about ctx.Err(): a loop that looks at ctx
				// before every attempt keeps it, even when it attempts at
				// the deadline's instant before the context's own timer
				// has run. Giving up before such a wait is a promise of
				// its own, GiveUpBeforeDeadline.
				if !first && ctx.Err() != nil {
					late = true
				}
				first = false
				return &RetryAfterError{Delay: wait}
			})
			if late {
				bad++
			}
		})
	}
	if bad > tolerance {
		t.Errorf("%s attempted on an expired context in %d of %d trials; want at most %d", l.Name, bad, trials, tolerance)
	} else if bad > 0 {
		t.Logf("%s attempted on an expired context in %d of %d trials (tolerated: the context's timer can fire between the loop's look at ctx and the attempt)", l.Name, bad, trials)
	}
}

func checkGiveUpBeforeDeadline(t *testing.T, l Loop) {
	for _, ahead := range []time.Duration{0, time.Second} {
		synctest.Test(t, func(t *testing.T) {
			// The server asks for a wait that ends at the deadline, or a
			// second past it: the loop knows now that no retry can happen
			// in time.
			left := 3 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), left)
			defer cancel()
			start := time.Now()
			attempts := 0
			s := settings
			s.MaxDelay = time.Minute
			l.Call(ctx, &spy{inner: unlimited{}}, s, func(ctx context.Context) error {
				attempts++
				return &RetryAfterError{Delay: left + ahead}
			})
			if took := time.Since(start); attempts != 1 || took >= left {
				t.Errorf("%s, told to wait %v with %v left: %d attempts, returned after %v; want 1 attempt and a return before the deadline", l.Name, left+ahead, left, attempts, took)
			}
		})
	}
}

func checkCancelInWait(t *testing.T, l Loop) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var c counter
		s := settings
		s.BaseDelay, s.MaxDelay = time.Hour, 2*time.Hour
		done := make(chan error, 1)
		go func() {
			done <- l.Call(ctx, &spy{inner: unlimited{}}, s, c.op(func(context.Context, int32) error {
				return &RetryAfterError{Delay: time.Hour}
			}))
		}()
		time.Sleep(time.Millisecond) // the first attempt has failed; the loop waits
		synctest.Wait()
		cancelled := time.Now()
		cancel()
		err := <-done
		if d := time.Since(cancelled); d > 0 {
			t.Errorf("%s returned %v after a cancel during its wait; want at once", l.Name, d)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s returned %v after a cancel during its wait; want an error wrapping context.Canceled", l.Name, err)
		}
		if n := c.n.Load(); n != 1 {
			t.Errorf("%s made %d attempts; want 1, none after the cancel", l.Name, n)
		}
	})
}

// checkNoLeak runs in real time, outside any bubble, and looks for new
// goroutines with goleak once the call has returned.
func checkNoLeak(t *testing.T, l Loop) {
	cases := []struct {
		name string
		op   func(ctx context.Context, n int32) error
		// cancelAfter, if positive, cancels the call this long after it
		// starts.
		cancelAfter time.Duration
	}{
		{"SucceedsOnSecondAttempt", func(ctx context.Context, n int32) error {
			if n == 1 {
				return ErrTransient
			}
			return nil
		}, 0},
		{"HonoursCtxAndIsCancelled", func(ctx context.Context, n int32) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
				return ErrTransient
			}
		}, 10 * time.Millisecond},
		{"IgnoresCtxAndIsCancelled", func(ctx context.Context, n int32) error {
			time.Sleep(30 * time.Millisecond) // ignores ctx
			return ErrTransient
		}, 10 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			ctx, cancel := context.WithCancel(context.Background())
			if tc.cancelAfter > 0 {
				stop := time.AfterFunc(tc.cancelAfter, cancel)
				defer stop.Stop()
			}
			var c counter
			var running atomic.Int32 // attempts in progress
			op := c.op(tc.op)
			s := Settings{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
			l.Call(ctx, &spy{inner: unlimited{}}, s, func(ctx context.Context) error {
				running.Add(1)
				defer running.Add(-1)
				return op(ctx)
			})
			if n := running.Load(); n > 0 {
				t.Errorf("%s returned while %d attempt(s) still ran: the goroutine running it outlives the call", l.Name, n)
			}
			// The call has returned. Everything it started must be gone;
			// goleak retries for a while before it reports.
			leak := goleak.Find(before)
			cancel() // now release anything that waits on ctx
			if leak != nil {
				t.Errorf("%s left goroutines running after the call returned:\n%v", l.Name, leak)
			}
		})
	}
}

func checkSharedBudget(t *testing.T, l Loop) {
	synctest.Test(t, func(t *testing.T) {
		shared, err := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 5, TransientCost: 1, ThrottledCost: 1})
		if err != nil {
			t.Fatal(err)
		}
		const calls = 20
		type result struct {
			spy      *spy
			attempts int32
			lastFail time.Time
			returned time.Time
		}
		results := make([]result, calls)
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				sp := &spy{inner: shared}
				var c counter
				s := Settings{MaxAttempts: 4, BaseDelay: 10 * time.Millisecond, MaxDelay: time.Second}
				l.Call(context.Background(), sp, s, c.op(func(context.Context, int32) error { return ErrTransient }))
				results[i] = result{sp, c.n.Load(), time.Unix(0, c.lastFail.Load()), time.Now()}
			})
		}
		wg.Wait()
		total := 0
		for i, r := range results {
			sp := r.spy
			total += sp.grants
			if retries := int(r.attempts) - 1; retries != sp.grants {
				t.Errorf("call %d: %d retries but %d granted by the budget; every retry must be granted first, once", i, retries, sp.grants)
			}
			if sp.asks != sp.grants+sp.denials || sp.denials > 1 {
				t.Errorf("call %d: asked %d times for %d grants and %d denials; want one ask per retry and at most one denial", i, sp.asks, sp.grants, sp.denials)
			}
			if sp.denials == 1 && !r.returned.Equal(r.lastFail) {
				t.Errorf("call %d: denied, yet returned %v after its last attempt failed; a denied call must return at once, without waiting", i, r.returned.Sub(r.lastFail))
			}
			if sp.requests != 1 {
				t.Errorf("call %d: %d requests reported to the budget; want 1", i, sp.requests)
			}
		}
		if total > 5 {
			t.Errorf("%d retries granted from a budget of 5", total)
		}
	})
}

func checkPermanent(t *testing.T, l Loop) {
	synctest.Test(t, func(t *testing.T) {
		var c counter
		sp := &spy{inner: unlimited{}}
		err := l.Call(context.Background(), sp, settings, c.op(func(context.Context, int32) error {
			return fmt.Errorf("400 bad request: %w", ErrPermanent)
		}))
		if n := c.n.Load(); n != 1 || sp.asks != 0 {
			t.Errorf("%s made %d attempts and asked the budget %d times for a permanent error; want 1 and 0", l.Name, n, sp.asks)
		}
		if !errors.Is(err, ErrPermanent) {
			t.Errorf("%s returned %v; want the permanent error", l.Name, err)
		}
	})
}

func checkMaxElapsed(t *testing.T, l Loop) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 5 * time.Second
		s := Settings{MaxAttempts: 1 << 30, BaseDelay: 10 * time.Millisecond, MaxDelay: time.Second, MaxElapsed: limit}
		start := time.Now()
		var lastAttempt atomic.Int64
		var attempts atomic.Int32
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.Call(ctx, &spy{inner: unlimited{}}, s, func(context.Context) error {
				attempts.Add(1)
				lastAttempt.Store(int64(time.Since(start)))
				return ErrTransient
			})
		}()
		select {
		case <-done:
		case <-time.After(time.Hour):
			cancel() // stop the loop, so that the bubble can end
			<-done
			t.Fatalf("%s still retrying an hour into a call with MaxElapsed %v (%d attempts)", l.Name, limit, attempts.Load())
		}
		if d := time.Duration(lastAttempt.Load()); d > limit {
			t.Errorf("%s attempted %v after the call started; want no attempt after MaxElapsed %v", l.Name, d, limit)
		}
		if d := time.Since(start); d > limit+s.MaxDelay {
			t.Errorf("%s returned %v after the call started; want within MaxElapsed %v plus one wait", l.Name, d, limit)
		}
	})
}

func checkServerDelay(t *testing.T, l Loop) {
	t.Run("CappedByMaxDelay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var at []time.Time
			s := Settings{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Second}
			l.Call(context.Background(), &spy{inner: unlimited{}}, s, func(context.Context) error {
				at = append(at, time.Now())
				if len(at) == 1 {
					return &RetryAfterError{Delay: time.Hour}
				}
				return nil
			})
			if len(at) == 2 && at[1].Sub(at[0]) > s.MaxDelay {
				t.Errorf("%s waited %v for a server delay of 1h; want at most MaxDelay %v", l.Name, at[1].Sub(at[0]), s.MaxDelay)
			}
		})
	})
	t.Run("CappedByTimeLeft", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			start := time.Now()
			attempts := 0
			s := Settings{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Minute}
			l.Call(ctx, &spy{inner: unlimited{}}, s, func(context.Context) error {
				attempts++
				return &RetryAfterError{Delay: 10 * time.Second}
			})
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("%s returned %v after the call started with 3s left and a 10s server delay; want no wait past the deadline", l.Name, d)
			}
			if attempts != 1 {
				t.Errorf("%s made %d attempts; want 1", l.Name, attempts)
			}
		})
	})
}

func checkIgnoringOp(t *testing.T, l Loop) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var c counter
		var finished atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.Call(ctx, &spy{inner: unlimited{}}, settings, c.op(func(context.Context, int32) error {
				time.Sleep(time.Second) // ignores ctx
				finished.Store(true)
				return ErrTransient
			}))
		}()
		time.Sleep(100 * time.Millisecond)
		cancel()
		<-done
		if !finished.Load() {
			t.Errorf("%s returned before its operation finished: the operation outlived the call", l.Name)
		}
		if n := c.n.Load(); n != 1 {
			t.Errorf("%s made %d attempts; want 1, none after the cancel", l.Name, n)
		}
	})
}

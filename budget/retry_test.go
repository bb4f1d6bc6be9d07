package budget_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// spy records what a Retrier tells its budget, and grants retries while it
// has any left.
type spy struct {
	mu                 sync.Mutex
	left               int
	requests, retries  int
	granted, successes []budget.Kind
}

func (s *spy) Request() { s.mu.Lock(); s.requests++; s.mu.Unlock() }
func (s *spy) Retry(k budget.Kind) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retries++
	if s.left == 0 {
		return false
	}
	s.left--
	s.granted = append(s.granted, k)
	return true
}
func (s *spy) Success(k budget.Kind) {
	s.mu.Lock()
	s.successes = append(s.successes, k)
	s.mu.Unlock()
}

var errBoom = errors.New("boom")

// failing returns an op that fails with errs in turn and then succeeds, and
// records when each attempt started.
func failing(errs ...error) (func(context.Context, budget.Attempt) error, *[]budget.Attempt, *[]time.Time) {
	var attempts []budget.Attempt
	var at []time.Time
	return func(ctx context.Context, a budget.Attempt) error {
		attempts = append(attempts, a)
		at = append(at, time.Now())
		if len(attempts) <= len(errs) {
			return errs[len(attempts)-1]
		}
		return nil
	}, &attempts, &at
}

func TestRetrierSucceedsFirstTime(t *testing.T) {
	b := &spy{left: 5}
	op, attempts, _ := failing()
	if err := (&budget.Retrier{Budget: b}).Do(context.Background(), op); err != nil {
		t.Fatalf("Do = %v, want nil", err)
	}
	if len(*attempts) != 1 || b.requests != 1 || b.retries != 0 || len(b.successes) != 1 || b.successes[0] != budget.FirstAttempt {
		t.Errorf("attempts %d, requests %d, retries %d, successes %v; want 1, 1, 0, [first]", len(*attempts), b.requests, b.retries, b.successes)
	}
}

func TestRetrierRetriesAndReportsTheKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &spy{left: 5}
		op, attempts, at := failing(errBoom, budget.MarkThrottled(errBoom, 0))
		r := &budget.Retrier{Budget: b, MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: 10 * time.Second}
		if err := r.Do(context.Background(), op); err != nil {
			t.Fatalf("Do = %v, want nil", err)
		}
		if len(*attempts) != 3 {
			t.Fatalf("%d attempts, want 3", len(*attempts))
		}
		key := (*attempts)[0].Key
		for i, a := range *attempts {
			if a.N != i+1 || a.Key != key {
				t.Errorf("attempt %d = %+v, want N=%d and key %v", i, a, i+1, key)
			}
		}
		if k := (*attempts)[2].Kind; k != budget.Throttled {
			t.Errorf("third attempt's Kind = %v, want throttled", k)
		}
		if len(b.granted) != 2 || b.granted[0] != budget.Transient || b.granted[1] != budget.Throttled {
			t.Errorf("granted %v, want [transient throttled]", b.granted)
		}
		if len(b.successes) != 1 || b.successes[0] != budget.Throttled {
			t.Errorf("successes %v, want [throttled]", b.successes)
		}
		// Full jitter: waits within [0, 1s] then [0, 2s].
		if w := (*at)[1].Sub((*at)[0]); w > time.Second {
			t.Errorf("first wait %v, want at most 1s", w)
		}
		if w := (*at)[2].Sub((*at)[1]); w > 2*time.Second {
			t.Errorf("second wait %v, want at most 2s", w)
		}
	})
}

func TestRetrierKeysDifferAcrossCalls(t *testing.T) {
	r := &budget.Retrier{}
	var keys []budget.Key
	for range 3 {
		_ = r.Do(context.Background(), func(_ context.Context, a budget.Attempt) error {
			keys = append(keys, a.Key)
			return nil
		})
	}
	if keys[0] == keys[1] || keys[1] == keys[2] || len(keys[0].String()) != 32 {
		t.Errorf("keys %v: want three different 32-digit keys", keys)
	}
}

func TestRetrierDenied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &spy{left: 1}
		op, attempts, _ := failing(errBoom, errBoom, errBoom)
		start := time.Now()
		err := (&budget.Retrier{Budget: b, MaxAttempts: 5}).Do(context.Background(), op)
		if !errors.Is(err, budget.ErrDenied) || !errors.Is(err, errBoom) {
			t.Errorf("Do = %v, want ErrDenied wrapping the op's error", err)
		}
		if len(*attempts) != 2 || b.retries != 2 {
			t.Errorf("%d attempts, %d asks; want 2 and 2", len(*attempts), b.retries)
		}
		// One wait before the granted retry, none after the denial.
		if last := (*attempts)[1]; time.Since(start) > 200*time.Millisecond || last.N != 2 {
			t.Errorf("returned %v after the start; a denied retry must not wait", time.Since(start))
		}
		if len(b.successes) != 0 {
			t.Errorf("successes %v, want none", b.successes)
		}
	})
}

func TestRetrierOutOfAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		op, attempts, _ := failing(errBoom, errBoom, errBoom, errBoom)
		err := (&budget.Retrier{MaxAttempts: 3}).Do(context.Background(), op)
		if !errors.Is(err, budget.ErrAttempts) || !errors.Is(err, errBoom) || len(*attempts) != 3 {
			t.Errorf("Do = %v after %d attempts, want ErrAttempts wrapping boom after 3", err, len(*attempts))
		}
	})
}

func TestRetrierPermanent(t *testing.T) {
	b := &spy{left: 5}
	op, attempts, _ := failing(budget.MarkPermanent(errBoom))
	err := (&budget.Retrier{Budget: b}).Do(context.Background(), op)
	if !errors.Is(err, errBoom) || errors.Is(err, budget.ErrAttempts) || len(*attempts) != 1 || b.retries != 0 {
		t.Errorf("Do = %v after %d attempts and %d asks; want boom after 1 and 0", err, len(*attempts), b.retries)
	}
}

func TestRetrierCancelledBeforeStart(t *testing.T) {
	b := &spy{left: 5}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	op, attempts, _ := failing()
	err := (&budget.Retrier{Budget: b}).Do(ctx, op)
	if !errors.Is(err, context.Canceled) || len(*attempts) != 0 || b.requests != 0 {
		t.Errorf("Do = %v after %d attempts, %d requests; want Canceled, 0, 0", err, len(*attempts), b.requests)
	}
}

func TestRetrierCancelledWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		op, attempts, _ := failing(budget.MarkThrottled(errBoom, time.Hour), errBoom)
		done := make(chan error)
		go func() { done <- (&budget.Retrier{MaxDelay: 2 * time.Hour}).Do(ctx, op) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		start := time.Now()
		cancel()
		err := <-done
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errBoom) || len(*attempts) != 1 {
			t.Errorf("Do = %v after %d attempts, want Canceled joined with boom after 1", err, len(*attempts))
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("returned %v after the cancel, want at once", d)
		}
	})
}

func TestRetrierServerDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		op, _, at := failing(budget.MarkThrottled(errBoom, 1500*time.Millisecond), budget.MarkThrottled(errBoom, time.Hour))
		r := &budget.Retrier{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 3 * time.Second}
		if err := r.Do(context.Background(), op); err != nil {
			t.Fatal(err)
		}
		if w := (*at)[1].Sub((*at)[0]); w != 1500*time.Millisecond {
			t.Errorf("waited %v for a 1.5s server delay, want 1.5s exactly", w)
		}
		if w := (*at)[2].Sub((*at)[1]); w != 3*time.Second {
			t.Errorf("waited %v for a 1h server delay, want MaxDelay 3s", w)
		}
	})
}

func TestRetrierGivesUpBeforeTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		op, attempts, _ := failing(budget.MarkThrottled(errBoom, 5*time.Second), errBoom)
		start := time.Now()
		err := (&budget.Retrier{}).Do(ctx, op)
		if !errors.Is(err, budget.ErrNoTime) || !errors.Is(err, errBoom) || len(*attempts) != 1 || time.Since(start) != 0 {
			t.Errorf("Do = %v after %d attempts and %v; want ErrNoTime at once after 1", err, len(*attempts), time.Since(start))
		}
	})
}

func TestRetrierMaxElapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		start := time.Now()
		r := &budget.Retrier{MaxAttempts: 1 << 30, BaseDelay: 10 * time.Millisecond, MaxDelay: time.Second, MaxElapsed: 5 * time.Second}
		err := r.Do(context.Background(), func(context.Context, budget.Attempt) error { calls++; return errBoom })
		if !errors.Is(err, budget.ErrNoTime) || time.Since(start) >= 5*time.Second {
			t.Errorf("Do = %v after %v and %d attempts; want ErrNoTime before 5s", err, time.Since(start), calls)
		}
	})
}

func TestDoReturnsTheValue(t *testing.T) {
	n := 0
	v, err := budget.Do(context.Background(), &budget.Retrier{BaseDelay: time.Nanosecond}, func(context.Context, budget.Attempt) (int, error) {
		n++
		if n < 2 {
			return 0, errBoom
		}
		return 42, nil
	})
	if v != 42 || err != nil {
		t.Errorf("Do = %v, %v; want 42, nil", v, err)
	}
}

func TestDefaultClassifier(t *testing.T) {
	tests := []struct {
		err       error
		kind      budget.Kind
		retryable bool
	}{
		{errBoom, budget.Transient, true},
		{budget.MarkTransient(errBoom), budget.Transient, true},
		{budget.MarkThrottled(errBoom, 0), budget.Throttled, true},
		{budget.MarkThrottled(errBoom, time.Second), budget.Throttled, true},
		{budget.MarkPermanent(errBoom), budget.FirstAttempt, false},
		{context.Canceled, budget.FirstAttempt, false},
		{context.DeadlineExceeded, budget.FirstAttempt, false},
		{errors.Join(errBoom, budget.MarkPermanent(errBoom)), budget.FirstAttempt, false},
	}
	for _, tt := range tests {
		k, ok := budget.DefaultClassifier(tt.err)
		if k != tt.kind || ok != tt.retryable {
			t.Errorf("DefaultClassifier(%v) = %v, %v; want %v, %v", tt.err, k, ok, tt.kind, tt.retryable)
		}
	}
	if budget.MarkPermanent(nil) != nil || budget.MarkTransient(nil) != nil || budget.MarkThrottled(nil, time.Second) != nil {
		t.Error("marking a nil error must return nil")
	}
}

var okOp = func(context.Context, budget.Attempt) error { return nil }

func TestRetrierSuccessDoesNotAllocate(t *testing.T) {
	b, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	r := &budget.Retrier{Budget: b}
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { _ = r.Do(ctx, okOp) }); n != 0 {
		t.Errorf("a successful call allocates %v times, want 0", n)
	}
}

// ctxSpy is a ContextBudget whose RetryContext answers granted and err,
// and which fails the test if the Retrier calls a plain method.
type ctxSpy struct {
	t          *testing.T
	granted    bool
	err        error
	requests   []context.Context
	retries    []budget.Kind
	successes  []budget.Kind
	successCtx []error // ctx.Err() as SuccessContext saw it
}

type ctxKey struct{}

func (s *ctxSpy) Request() { s.t.Error("the Retrier called Request, not RequestContext") }
func (s *ctxSpy) Retry(budget.Kind) bool {
	s.t.Error("the Retrier called Retry, not RetryContext")
	return false
}
func (s *ctxSpy) Success(budget.Kind) { s.t.Error("the Retrier called Success, not SuccessContext") }
func (s *ctxSpy) RequestContext(ctx context.Context) error {
	s.requests = append(s.requests, ctx)
	return errors.New("request not counted")
}
func (s *ctxSpy) RetryContext(_ context.Context, k budget.Kind) (bool, error) {
	s.retries = append(s.retries, k)
	return s.granted, s.err
}
func (s *ctxSpy) SuccessContext(ctx context.Context, k budget.Kind) error {
	s.successes = append(s.successes, k)
	s.successCtx = append(s.successCtx, ctx.Err())
	return errors.New("success not counted")
}

// A ContextBudget is called through its Context methods, and a budget that
// fails to answer is not a denial: the call ends with ErrBudgetUnavailable
// and both errors in the chain.
func TestRetrierCallsContextMethods(t *testing.T) {
	opErr := errors.New("op failed")
	down := errors.New("budget store unreachable")
	ctx := context.WithValue(context.Background(), ctxKey{}, "call")
	r := &budget.Retrier{MaxAttempts: 3, Jitter: func(time.Duration) time.Duration { return 0 }}

	t.Run("failed and not granted", func(t *testing.T) {
		s := &ctxSpy{t: t, err: down}
		r.Budget = s
		err := r.Do(ctx, func(context.Context, budget.Attempt) error { return opErr })
		if !errors.Is(err, budget.ErrBudgetUnavailable) || !errors.Is(err, down) || !errors.Is(err, opErr) || errors.Is(err, budget.ErrDenied) {
			t.Errorf("Do = %v; want ErrBudgetUnavailable (not ErrDenied) with the budget's and the operation's errors", err)
		}
		if len(s.requests) != 1 || s.requests[0].Value(ctxKey{}) != "call" {
			t.Errorf("RequestContext calls %d, want 1 with the call's context", len(s.requests))
		}
		if len(s.retries) != 1 {
			t.Errorf("RetryContext called %d times, want 1", len(s.retries))
		}
	})
	t.Run("failed but granted by a fallback", func(t *testing.T) {
		s := &ctxSpy{t: t, granted: true, err: down}
		r.Budget = s
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		err := r.Do(cctx, func(_ context.Context, a budget.Attempt) error {
			if a.N == 1 {
				return opErr
			}
			cancel() // the context ends as the operation succeeds
			return nil
		})
		if err != nil {
			t.Errorf("Do = %v, want nil: the retry was granted and succeeded", err)
		}
		if len(s.successes) != 1 || s.successes[0] != budget.Transient || s.successCtx[0] != nil {
			t.Errorf("SuccessContext calls %v with context errors %v; want one, for a transient retry, with a live context", s.successes, s.successCtx)
		}
	})
	t.Run("denied", func(t *testing.T) {
		s := &ctxSpy{t: t}
		r.Budget = s
		err := r.Do(ctx, func(context.Context, budget.Attempt) error { return opErr })
		if !errors.Is(err, budget.ErrDenied) || errors.Is(err, budget.ErrBudgetUnavailable) {
			t.Errorf("Do = %v, want ErrDenied", err)
		}
	})
}

package budget_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// failureLog is a FailureCounter that grants every retry and logs what it
// is told, Retry and Failed, in order.
type failureLog struct {
	mu  sync.Mutex
	log []string
}

var _ budget.FailureCounter = (*failureLog)(nil)

func (f *failureLog) note(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, s)
}

func (f *failureLog) Request()                 {}
func (f *failureLog) Success(budget.Kind)      {}
func (f *failureLog) Retry(k budget.Kind) bool { f.note("Retry(" + k.String() + ")"); return true }
func (f *failureLog) Failed(k budget.Kind)     { f.note("Failed(" + k.String() + ")") }

func (f *failureLog) told() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

// Retrier tells a FailureCounter of each retryable failure exactly once:
// through Retry when it asks for a retry after it, else through Failed.
func TestRetrierTellsFailureCounter(t *testing.T) {
	errTransient := errors.New("transient")
	forbidden := func(err error) (budget.Kind, bool) {
		if errors.Is(err, errTransient) {
			return budget.Throttled, false // the server said: do not retry
		}
		return budget.DefaultClassifier(err)
	}
	for _, tt := range []struct {
		name     string
		r        budget.Retrier
		ctx      func() (context.Context, context.CancelFunc)
		op       func(ctx context.Context, cancel context.CancelFunc, a budget.Attempt) error
		want     []string
		wantErr  error
		attempts int
	}{
		{
			name:     "out of attempts",
			r:        budget.Retrier{MaxAttempts: 3},
			op:       func(context.Context, context.CancelFunc, budget.Attempt) error { return errTransient },
			want:     []string{"Retry(transient)", "Retry(transient)", "Failed(transient)"},
			wantErr:  budget.ErrAttempts,
			attempts: 3,
		},
		{
			name: "out of attempts after a throttle",
			r:    budget.Retrier{MaxAttempts: 2},
			op: func(context.Context, context.CancelFunc, budget.Attempt) error {
				return budget.MarkThrottled(errTransient, time.Nanosecond)
			},
			want:     []string{"Retry(throttled)", "Failed(throttled)"},
			wantErr:  budget.ErrAttempts,
			attempts: 2,
		},
		{
			name:     "one attempt only",
			r:        budget.Retrier{MaxAttempts: 1},
			op:       func(context.Context, context.CancelFunc, budget.Attempt) error { return errTransient },
			want:     []string{"Failed(transient)"},
			wantErr:  budget.ErrAttempts,
			attempts: 1,
		},
		{
			name: "no time before the deadline",
			r:    budget.Retrier{MaxAttempts: 3, BaseDelay: time.Hour, MaxDelay: time.Hour, Jitter: func(c time.Duration) time.Duration { return c }},
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Minute)
			},
			op:       func(context.Context, context.CancelFunc, budget.Attempt) error { return errTransient },
			want:     []string{"Failed(transient)"},
			wantErr:  budget.ErrNoTime,
			attempts: 1,
		},
		{
			name:     "no time within MaxElapsed",
			r:        budget.Retrier{MaxAttempts: 3, BaseDelay: time.Hour, MaxDelay: time.Hour, MaxElapsed: time.Minute, Jitter: func(c time.Duration) time.Duration { return c }},
			op:       func(context.Context, context.CancelFunc, budget.Attempt) error { return errTransient },
			want:     []string{"Failed(transient)"},
			wantErr:  budget.ErrNoTime,
			attempts: 1,
		},
		{
			name:     "a retry the server forbade",
			r:        budget.Retrier{MaxAttempts: 3, Classify: forbidden},
			op:       func(context.Context, context.CancelFunc, budget.Attempt) error { return errTransient },
			want:     []string{"Failed(throttled)"},
			wantErr:  errTransient,
			attempts: 1,
		},
		{
			name: "permanent",
			r:    budget.Retrier{MaxAttempts: 3},
			op: func(context.Context, context.CancelFunc, budget.Attempt) error {
				return budget.MarkPermanent(errTransient)
			},
			want:     nil,
			wantErr:  errTransient,
			attempts: 1,
		},
		{
			name: "the context ended during the attempt",
			r:    budget.Retrier{MaxAttempts: 3},
			op: func(_ context.Context, cancel context.CancelFunc, _ budget.Attempt) error {
				cancel()
				return errTransient
			},
			want:     nil,
			wantErr:  context.Canceled,
			attempts: 1,
		},
		{
			name: "success after a retry",
			r:    budget.Retrier{MaxAttempts: 3},
			op: func(_ context.Context, _ context.CancelFunc, a budget.Attempt) error {
				if a.N == 1 {
					return errTransient
				}
				return nil
			},
			want:     []string{"Retry(transient)"},
			attempts: 2,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			if tt.ctx != nil {
				ctx, cancel = tt.ctx()
			}
			defer cancel()
			b := &failureLog{}
			r := tt.r
			r.Budget = b
			if r.BaseDelay == 0 {
				r.BaseDelay = time.Nanosecond
			}
			attempts := 0
			err := r.Do(ctx, func(ctx context.Context, a budget.Attempt) error {
				attempts++
				return tt.op(ctx, cancel, a)
			})
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Do() = %v; want %v", err, tt.wantErr)
			}
			if attempts != tt.attempts {
				t.Errorf("%d attempts; want %d", attempts, tt.attempts)
			}
			if got := b.told(); !slices.Equal(got, tt.want) {
				t.Errorf("the budget was told %q; want %q", got, tt.want)
			}
		})
	}
}

// Throttle.Failed takes the token a Retry of the same kind takes, answers
// nothing, and counts in neither Granted nor Denied; a kind that is not a
// retry kind takes nothing, and the count stops at zero.
func TestThrottleFailed(t *testing.T) {
	failed, _ := budget.NewThrottle(3, 0.5)
	retried, _ := budget.NewThrottle(3, 0.5)
	for i, k := range []budget.Kind{budget.Transient, budget.FirstAttempt, budget.Throttled, budget.Kind(9), budget.Transient, budget.Throttled, budget.Transient} {
		failed.Failed(k)
		retried.Retry(k)
		if got, want := failed.Available(), retried.Available(); got != want {
			t.Fatalf("after %d calls, the last of kind %v: Failed leaves %v tokens, Retry %v", i+1, k, got, want)
		}
	}
	if got := failed.Available(); got != 0 {
		t.Errorf("Available() = %v after more failures than tokens; want 0", got)
	}
	if s := failed.Stats(); s.Granted+s.Denied != 0 {
		t.Errorf("Stats() = %+v after Failed only; want no grant and no denial", s)
	}
	failed.Success(budget.FirstAttempt)
	if got := failed.Available(); got != 0.5 {
		t.Errorf("Available() = %v after a success; want 0.5", got)
	}
}

// A Throttle behind Retrier spends what gRPC's throttling spends: every
// failed attempt takes a token, the last one's too. Throttle(10, 0.1) and
// calls that fail every attempt, 3 attempts each: 10 → 9, 8 (retried) → 7
// (out of attempts); 6, 5 (not above 5, denied); 4 (denied at once).
func TestRetrierSpendsThrottleAsGRPC(t *testing.T) {
	th, err := budget.NewThrottle(10, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	r := budget.Retrier{Budget: th, MaxAttempts: 3, BaseDelay: time.Nanosecond}
	fail := errors.New("unavailable")
	var attempts []int
	var tokens []float64
	for range 3 {
		n := 0
		_ = r.Do(context.Background(), func(context.Context, budget.Attempt) error { n++; return fail })
		attempts = append(attempts, n)
		tokens = append(tokens, th.Available())
	}
	if want := []int{3, 2, 1}; !slices.Equal(attempts, want) {
		t.Errorf("attempts per call %v; want %v", attempts, want)
	}
	if want := []float64{7, 5, 4}; !slices.Equal(tokens, want) {
		t.Errorf("tokens after each call %v; want %v", tokens, want)
	}
}

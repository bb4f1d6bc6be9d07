package budget_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// events records what a Retrier's hooks report, as lines of text.
type events struct{ log []string }

func (e *events) hooks() budget.Hooks {
	return budget.Hooks{
		OnAttempt: func(_ context.Context, a budget.Attempt) {
			e.log = append(e.log, fmt.Sprintf("attempt %d %v", a.N, a.Kind))
		},
		OnRetry: func(_ context.Context, r budget.RetryEvent) {
			e.log = append(e.log, fmt.Sprintf("retry after %d %v granted=%v delay=%v budgetErr=%v", r.Attempt.N, r.Kind, r.Granted, r.Delay, r.BudgetErr != nil))
		},
		OnGiveUp: func(_ context.Context, g budget.GiveUpEvent) {
			e.log = append(e.log, fmt.Sprintf("give up after %d %v: %v", g.Attempts, g.Kind, reason(g.Err)))
		},
	}
}

// reason names the sentinel an error of Do wraps.
func reason(err error) string {
	for _, s := range []struct {
		err  error
		name string
	}{
		{budget.ErrDenied, "denied"}, {budget.ErrAttempts, "attempts"}, {budget.ErrNoTime, "no time"},
		{budget.ErrBudgetUnavailable, "unavailable"}, {context.Canceled, "canceled"}, {context.DeadlineExceeded, "deadline"},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return "not retryable"
}

// The hooks see every attempt, every answer of the budget, with its kind
// and the wait it came with, and one give-up per failed call, on each way
// a call can end.
func TestRetrierHooks(t *testing.T) {
	down := errors.New("store down")
	wait := func(time.Duration) time.Duration { return 7 * time.Millisecond }
	tests := []struct {
		name   string
		r      budget.Retrier
		errs   []error
		cancel bool // cancel the context during the first backoff
		want   []string
	}{
		{"FirstAttemptSucceeds", budget.Retrier{}, nil, false, []string{"attempt 1 first"}},
		{"RetriedThenSucceeds", budget.Retrier{Budget: &spy{left: 5}, Jitter: wait},
			[]error{errBoom, budget.MarkThrottled(errBoom, 3*time.Millisecond)}, false, []string{
				"attempt 1 first",
				"retry after 1 transient granted=true delay=7ms budgetErr=false",
				"attempt 2 transient",
				"retry after 2 throttled granted=true delay=3ms budgetErr=false",
				"attempt 3 throttled",
			}},
		{"Denied", budget.Retrier{Budget: &spy{}, Jitter: wait}, []error{errBoom}, false, []string{
			"attempt 1 first",
			"retry after 1 transient granted=false delay=7ms budgetErr=false",
			"give up after 1 transient: denied",
		}},
		{"Unavailable", budget.Retrier{Budget: &ctxSpy{t: t, err: down}, Jitter: wait}, []error{errBoom}, false, []string{
			"attempt 1 first",
			"retry after 1 transient granted=false delay=7ms budgetErr=true",
			"give up after 1 transient: unavailable",
		}},
		{"OutOfAttempts", budget.Retrier{MaxAttempts: 2, Jitter: wait}, []error{errBoom, errBoom}, false, []string{
			"attempt 1 first",
			"retry after 1 transient granted=true delay=7ms budgetErr=false",
			"attempt 2 transient",
			"give up after 2 transient: attempts",
		}},
		{"NoTime", budget.Retrier{MaxElapsed: time.Millisecond, Jitter: wait}, []error{errBoom}, false, []string{
			"attempt 1 first",
			"give up after 1 transient: no time",
		}},
		{"NotRetryable", budget.Retrier{}, []error{budget.MarkPermanent(errBoom)}, false, []string{
			"attempt 1 first",
			"give up after 1 first: not retryable",
		}},
		{"CancelledInTheBackoff", budget.Retrier{BaseDelay: time.Hour, MaxDelay: time.Hour, Jitter: func(c time.Duration) time.Duration { return c }},
			[]error{errBoom}, true, []string{
				"attempt 1 first",
				"retry after 1 transient granted=true delay=1h0m0s budgetErr=false",
				"give up after 1 transient: canceled",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e events
			r := tt.r
			r.Hooks = e.hooks()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				onRetry := r.Hooks.OnRetry
				r.Hooks.OnRetry = func(ctx context.Context, ev budget.RetryEvent) { onRetry(ctx, ev); cancel() }
			}
			op, _, _ := failing(tt.errs...)
			err := r.Do(ctx, op)
			if !reflect.DeepEqual(e.log, tt.want) {
				t.Errorf("hooks saw\n\t%s\nwant\n\t%s", strings.Join(e.log, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
			if gaveUp := strings.HasPrefix(e.log[len(e.log)-1], "give up"); gaveUp != (err != nil) {
				t.Errorf("Do = %v, but the last event is %q", err, e.log[len(e.log)-1])
			}
		})
	}
}

// A panicking operation is not a give-up: the hooks see its attempt only.
func TestRetrierHooksOnPanic(t *testing.T) {
	var e events
	r := budget.Retrier{Hooks: e.hooks()}
	func() {
		defer func() { _ = recover() }()
		_ = r.Do(context.Background(), func(context.Context, budget.Attempt) error { panic("boom") })
	}()
	if want := []string{"attempt 1 first"}; !reflect.DeepEqual(e.log, want) {
		t.Errorf("hooks saw %q, want %q", e.log, want)
	}
}

// Hooks that do not allocate leave a successful call free of allocations.
func TestRetrierHooksDoNotAllocate(t *testing.T) {
	b, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	var attempts, retries, giveUps int
	r := &budget.Retrier{Budget: b, Hooks: budget.Hooks{
		OnAttempt: func(context.Context, budget.Attempt) { attempts++ },
		OnRetry:   func(context.Context, budget.RetryEvent) { retries++ },
		OnGiveUp:  func(context.Context, budget.GiveUpEvent) { giveUps++ },
	}}
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { _ = r.Do(ctx, okOp) }); n != 0 {
		t.Errorf("a successful call with hooks allocates %v times, want 0", n)
	}
	if attempts == 0 || retries != 0 || giveUps != 0 {
		t.Errorf("hooks counted %d attempts, %d retries, %d give-ups; want some attempts only", attempts, retries, giveUps)
	}
}

// Every reference budget counts its answers, and Ratio reports the retries
// its window still allows.
func TestStats(t *testing.T) {
	clock := new(budget.ManualClock)
	rc := budget.RatioConfig{Ratio: 0.5, Window: time.Second, Slots: 10, Floor: 1, Clock: clock}
	budgets := []struct {
		name string
		b    budget.StatsBudget
	}{
		{"TokenBucket", newBucket(t, budget.TokenBucketConfig{Capacity: 2, TransientCost: 1, ThrottledCost: 1})},
		{"Ratio", newRatio(t, rc)},
		{"Throttle", newThrottle(t, 4, 1)},
		{"InFlight", newInFlight(t, budget.InFlightConfig{Ratio: 0, MinConcurrency: 2})},
	}
	for _, tt := range budgets {
		t.Run(tt.name, func(t *testing.T) {
			tt.b.Request()
			var want budget.Stats
			for range 5 {
				if tt.b.Retry(budget.Transient) {
					want.Granted++
				} else {
					want.Denied++
				}
			}
			tt.b.Retry(budget.FirstAttempt) // not a retry kind: denied
			want.Denied++
			if got := tt.b.Stats(); got != want || got.Granted == 0 || got.Denied < 2 {
				t.Errorf("Stats() = %+v, want %+v with some of each", got, want)
			}
		})
	}
}

func TestRatioAvailable(t *testing.T) {
	clock := new(budget.ManualClock)
	r := newRatio(t, budget.RatioConfig{Ratio: 0.5, Window: time.Second, Slots: 10, Floor: 1, Clock: clock})
	check := func(want float64) {
		t.Helper()
		if got := r.Available(); got != want {
			t.Errorf("Available() = %v, want %v", got, want)
		}
	}
	check(1) // the floor
	for range 6 {
		r.Request()
	}
	check(3) // half of 6
	r.Retry(budget.Transient)
	check(2)
	clock.Advance(500 * time.Millisecond)
	for range 4 {
		r.Request()
	}
	check(4) // half of 10, less 1
	clock.Advance(500 * time.Millisecond)
	check(2) // the first 6 requests and the retry have left: half of 4
	clock.Advance(-time.Second)
	r.Request()
	// The clock went back, and the Ratio counts at the latest instant a
	// Request or a Retry saw, 0.5s: Available did not move it. The window
	// there holds 11 requests and 1 retry.
	check(4)
}

package budget_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// endLog is an InFlightBudget that grants while grants lasts and logs each
// call made on it.
type endLog struct {
	grants int
	log    []string
}

func (l *endLog) Request() { l.log = append(l.log, "request") }
func (l *endLog) Retry(k budget.Kind) bool {
	ok := l.grants > 0
	l.grants--
	l.log = append(l.log, fmt.Sprintf("retry(%v)=%v", k, ok))
	return ok
}
func (l *endLog) Success(k budget.Kind)    { l.log = append(l.log, "success("+k.String()+")") }
func (l *endLog) AttemptEnd(k budget.Kind) { l.log = append(l.log, "end("+k.String()+")") }
func (l *endLog) CallEnd()                 { l.log = append(l.log, "callend") }

// wellFormed checks the structure InFlightBudget promises: each start (the
// request, a granted retry) has one end of its kind, before the next
// start; a success comes inside an attempt; the call ends once, last.
func wellFormed(log []string) error {
	open := ""
	for i, e := range log {
		switch {
		case e == "request" && i == 0:
			open = "first"
		case strings.HasSuffix(e, "=true"):
			if open != "" {
				return fmt.Errorf("event %d %s while %s is open", i, e, open)
			}
			open = strings.TrimSuffix(strings.TrimPrefix(e, "retry("), ")=true")
		case strings.HasSuffix(e, "=false"):
			if open != "" {
				return fmt.Errorf("event %d %s while %s is open", i, e, open)
			}
		case strings.HasPrefix(e, "success("):
			if e != "success("+open+")" {
				return fmt.Errorf("event %d %s with %q open", i, e, open)
			}
		case strings.HasPrefix(e, "end("):
			if e != "end("+open+")" {
				return fmt.Errorf("event %d %s with %q open", i, e, open)
			}
			open = ""
		case e == "callend" && i == len(log)-1:
			if open != "" {
				return fmt.Errorf("the call ended with %s open", open)
			}
			return nil
		default:
			return fmt.Errorf("event %d %s is out of place", i, e)
		}
	}
	return errors.New("the call never ended")
}

// The Retrier ends every attempt it starts, and then the call, on every
// path out of Do.
func TestRetrierEndsEveryStart(t *testing.T) {
	boom := errors.New("boom")
	fails := func(n int, last error) func(context.Context, budget.Attempt) error {
		return func(_ context.Context, a budget.Attempt) error {
			if a.N <= n {
				return boom
			}
			return last
		}
	}
	cases := []struct {
		name   string
		grants int
		r      budget.Retrier
		op     func(context.Context, budget.Attempt) error
		cancel time.Duration // cancel the call after this long, if set
		want   []string
	}{
		{"FirstSucceeds", 9, budget.Retrier{}, fails(0, nil), 0,
			[]string{"request", "success(first)", "end(first)", "callend"}},
		{"RetrySucceeds", 9, budget.Retrier{}, fails(1, nil), 0,
			[]string{"request", "end(first)", "retry(transient)=true", "success(transient)", "end(transient)", "callend"}},
		{"Permanent", 9, budget.Retrier{}, fails(0, budget.MarkPermanent(boom)), 0,
			[]string{"request", "end(first)", "callend"}},
		{"Denied", 0, budget.Retrier{}, fails(9, nil), 0,
			[]string{"request", "end(first)", "retry(transient)=false", "callend"}},
		{"DeniedAfterOne", 1, budget.Retrier{}, fails(9, nil), 0,
			[]string{"request", "end(first)", "retry(transient)=true", "end(transient)", "retry(transient)=false", "callend"}},
		{"OutOfAttempts", 9, budget.Retrier{MaxAttempts: 2}, fails(9, nil), 0,
			[]string{"request", "end(first)", "retry(transient)=true", "end(transient)", "callend"}},
		{"NoTime", 9, budget.Retrier{MaxElapsed: time.Second, BaseDelay: time.Hour, MaxDelay: time.Hour}, fails(9, nil), 0,
			[]string{"request", "end(first)", "callend"}},
		{"CancelledInBackoff", 9, budget.Retrier{BaseDelay: time.Hour, MaxDelay: time.Hour}, fails(9, nil), time.Minute,
			[]string{"request", "end(first)", "retry(transient)=true", "end(transient)", "callend"}},
		{"CancelledInAttempt", 9, budget.Retrier{}, func(ctx context.Context, a budget.Attempt) error {
			<-ctx.Done()
			return ctx.Err()
		}, time.Minute, []string{"request", "end(first)", "callend"}},
		{"Panics", 9, budget.Retrier{}, func(context.Context, budget.Attempt) error { panic(boom) }, 0,
			[]string{"request", "end(first)", "callend"}},
		{"PanicsInRetry", 9, budget.Retrier{}, func(_ context.Context, a budget.Attempt) error {
			if a.N > 1 {
				panic(boom)
			}
			return boom
		}, 0, []string{"request", "end(first)", "retry(transient)=true", "end(transient)", "callend"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &endLog{grants: tc.grants}
				r := tc.r
				r.Budget = l
				r.Jitter = func(c time.Duration) time.Duration { return c }
				ctx := t.Context()
				if tc.cancel > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx) // no deadline, which would stop the Retrier from waiting at all
					defer cancel()
					time.AfterFunc(tc.cancel, cancel)
				}
				func() {
					defer func() { _ = recover() }()
					_ = r.Do(ctx, tc.op)
				}()
				if err := wellFormed(l.log); err != nil {
					t.Errorf("%v: %q", err, l.log)
				}
				if !slices.Equal(l.log, tc.want) {
					t.Errorf("the budget saw %q, want %q", l.log, tc.want)
				}
			})
		})
	}
}

// An operation that calls runtime.Goexit (t.FailNow in a test) still ends
// its attempt and its call.
func TestRetrierEndsOnGoexit(t *testing.T) {
	l := &endLog{grants: 9}
	r := budget.Retrier{Budget: l}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Do(context.Background(), func(context.Context, budget.Attempt) error {
			runtime.Goexit()
			return nil
		})
	}()
	<-done
	if want := []string{"request", "end(first)", "callend"}; !slices.Equal(l.log, want) {
		t.Errorf("the budget saw %q, want %q", l.log, want)
	}
}

func TestInFlightConfigErrors(t *testing.T) {
	for _, c := range []budget.InFlightConfig{
		{Ratio: -0.1}, {Ratio: 1.5}, {Ratio: 0.2, MinConcurrency: -1}, {Ratio: 0.2, MinConcurrency: 1 << 33},
	} {
		if _, err := budget.NewInFlight(c); !errors.Is(err, budget.ErrInvalidConfig) {
			t.Errorf("NewInFlight(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}
	if _, err := budget.NewInFlight(budget.InFlightConfig{Ratio: 0, MinConcurrency: 0}); err != nil {
		t.Errorf("a budget that grants nothing is still a budget: %v", err)
	}
}

// The rule at its edges, with Envoy's defaults: 3 retries in flight always,
// and then one more per 5 calls in flight.
func TestInFlightRule(t *testing.T) {
	b := newInFlight(t, budget.DefaultInFlightConfig())
	grants := func() int {
		n := 0
		for b.Retry(budget.Transient) {
			n++
		}
		return n
	}
	if n := grants(); n != 3 {
		t.Fatalf("no calls in flight: %d retries granted, want MinConcurrency 3", n)
	}
	for range 20 {
		b.Request()
	}
	if n := grants(); n != 1 {
		t.Fatalf("20 calls in flight: %d more granted, want 1 (4 in all)", n)
	}
	if got := b.Available(); got != 0 {
		t.Errorf("Available() = %v at the limit, want 0", got)
	}
	b.AttemptEnd(budget.Throttled)
	b.AttemptEnd(budget.FirstAttempt) // ends no retry
	if got := b.Available(); got != 1 {
		t.Errorf("Available() = %v after one retry ended, want 1", got)
	}
	for range 30 {
		b.CallEnd()
	}
	if calls, retries := b.InFlight(); calls != 0 || retries != 3 {
		t.Errorf("InFlight() = %d, %d after more CallEnds than calls, want 0, 3", calls, retries)
	}
	for range 5 {
		b.AttemptEnd(budget.Transient)
	}
	if calls, retries := b.InFlight(); calls != 0 || retries != 0 {
		t.Errorf("InFlight() = %d, %d after more ends than retries, want 0, 0", calls, retries)
	}
	if b.Retry(budget.Kind(7)) || b.Retry(budget.FirstAttempt) {
		t.Error("a kind that is not a retry kind was granted")
	}
}

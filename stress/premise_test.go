package stress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// retrier returns budget.Retrier's adapter with the Settings it is given
// changed by change first: a loop that cannot do what the check asks.
func retrier(name string, change func(*Settings)) Loop {
	return Loop{Name: name, Call: func(ctx context.Context, b budget.Budget, s Settings, op func(context.Context) error) error {
		change(&s)
		return RetrierLoop().Call(ctx, b, s, op)
	}}
}

// neverAttempts returns without calling op.
var neverAttempts = Loop{Name: "NeverAttempts", Call: func(ctx context.Context, _ budget.Budget, _ Settings, _ func(context.Context) error) error {
	return ctx.Err()
}}

// Each check, on a loop that keeps its rule but cannot bring about the
// situation the check needs, fails with "premise not reached" (it used to
// pass, for want of a test).
func TestPremiseNotReached(t *testing.T) {
	t.Parallel()
	cases := []struct {
		check string
		loop  Loop
	}{
		{"NoAttemptOnDoneContext", neverAttempts},
		{"NoAttemptAfterCancel", retrier("WaitsEveryTime", func(s *Settings) {
			// No FixedDelay; every wait is its ceiling, so at least 1ns.
			s.FixedDelay, s.NoJitter = false, true
		})},
		{"NoAttemptOnExpiredDeadline", Loop{Name: "LateByANanosecond", Call: func(ctx context.Context, b budget.Budget, s Settings, op func(context.Context) error) error {
			s.FixedDelay = false
			return RetrierLoop().Call(ctx, b, s, func(ctx context.Context) error {
				err := op(ctx)
				if ra := (*RetryAfterError)(nil); errors.As(err, &ra) {
					return &RetryAfterError{Delay: ra.Delay + time.Nanosecond}
				}
				return err
			})
		}}},
		{"GiveUpBeforeDeadline", retrier("WaitsASecondAtMost", func(s *Settings) {
			s.MaxDelay, s.BaseDelay = time.Second, min(s.BaseDelay, time.Second)
		})},
		{"PromptReturnOnCancel", retrier("OneAttempt", func(s *Settings) { s.MaxAttempts = 1 })},
		{"NoGoroutineOutlivesCall", neverAttempts},
		{"SharedBudgetRespected", retrier("OneAttempt", func(s *Settings) { s.MaxAttempts = 1 })},
		{"PermanentNeverRetried", retrier("OneAttempt", func(s *Settings) { s.MaxAttempts = 1 })},
		{"MaxElapsedEndsTheLoop", retrier("FiveAttempts", func(s *Settings) { s.MaxAttempts = min(s.MaxAttempts, 5) })},
		{"ServerDelayCapped", Loop{Name: "DeafToServers", Call: func(ctx context.Context, b budget.Budget, s Settings, op func(context.Context) error) error {
			return RetrierLoop().Call(ctx, b, s, func(ctx context.Context) error {
				if err := op(ctx); errors.As(err, new(*RetryAfterError)) {
					return ErrTransient
				} else {
					return err
				}
			})
		}}},
		{"IgnoringOpEndsTheCall", neverAttempts},
		// It ends every attempt it starts, but never retries: no denial,
		// no granted retry, no backoff to cancel.
		{"EveryStartEnds", retrier("OneAttempt", func(s *Settings) { s.MaxAttempts = 1 })},
		// It tells Failed of its one failure, but never makes the attempts
		// the check needs.
		{"EveryFailureCounted", retrier("OneAttempt", func(s *Settings) { s.MaxAttempts = 1 })},
		// It tells Success of its one attempt, but never retries.
		{"EverySuccessReported", retrier("OneAttempt", func(s *Settings) { s.MaxAttempts = 1 })},
		// It does not hedge (and, unlike RetrierLoop, does not Skip).
		{"HedgeLosersCancelled", retrier("NoHedge", func(*Settings) {})},
		// It stops at MaxAttempts whatever NoAttemptCap says.
		{"UncappedLoopEnds", retrier("Capped", func(*Settings) {})},
	}
	if len(cases) != len(LoopChecks()) {
		t.Fatalf("%d cases for %d checks", len(cases), len(LoopChecks()))
	}
	for _, tc := range cases {
		// A name per case, so that the child runs only its own.
		l := tc.loop
		l.Name = tc.check + "/" + l.Name
		outcomes := isolate(t, l, []string{tc.check}, time.Minute, 0)
		if outcomes == nil {
			continue // the child
		}
		o := outcomes[tc.check]
		if o.Result != "fail" || !strings.Contains(o.Output, "premise not reached: expected ") {
			t.Errorf("%s on %s: %s, want a failure with \"premise not reached\":\n%s", tc.check, l.Name, o.Result, o.Output)
		} else {
			t.Logf("%s on %s:\n%s", tc.check, l.Name, o.Output)
		}
	}
}

// An adapter that leaves its loop's jitter on, whatever FixedDelay and
// NoJitter say, used to pass EveryFailureCounted in some runs and fail it
// ("premise not reached", or not) in others: whether a jittered wait of at
// most 1h reached a deadline 1s away was chance. The FixedDelay probe
// makes it a premise failure naming FixedDelay in every run.
func TestJitteringAdapterFailsTheSameEveryRun(t *testing.T) {
	t.Parallel()
	l := retrier("Jittering", func(s *Settings) { s.FixedDelay, s.NoJitter = false, false })
	for i := range 5 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			outcomes := isolate(t, l, []string{"EveryFailureCounted"}, time.Minute, 0)
			if outcomes == nil {
				return // the child
			}
			o := outcomes["EveryFailureCounted"]
			if o.Result != "fail" || !strings.Contains(o.Output, "premise not reached: expected waits of BaseDelay") || !strings.Contains(o.Output, "ignores FixedDelay") {
				t.Errorf("run %d: %s, want a premise failure naming FixedDelay:\n%s", i, o.Result, o.Output)
			}
		})
	}
}

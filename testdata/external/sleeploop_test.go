package external

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/stress"
)

func sleepLoop() stress.Loop {
	return stress.Loop{
		Name: "SleepRetry",
		Call: func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
			retryable := func(err error) bool { return errors.Is(err, stress.ErrTransient) }
			return SleepRetry(ctx, b, s.MaxAttempts, s.BaseDelay, max(s.MaxDelay, s.BaseDelay), retryable, op)
		},
	}
}

// A loop that waits with time.Sleep breaks the promise to return at once
// on a cancel during the wait, and no other of those checked here: under
// budgetcheck too, where the sleep is rewritten to pass the baton, another
// goroutine's sleep is not charged to a call that was denied.
func TestSleepLoop(t *testing.T) {
	out := stress.IsolatedLoopChecks(t, sleepLoop(), 2*time.Minute, "PromptReturnOnCancel", "SharedBudgetRespected", "PermanentNeverRetried")
	if out == nil {
		return // a child
	}
	if o := out["PromptReturnOnCancel"]; o.Result != "fail" {
		t.Errorf("PromptReturnOnCancel: %s, want fail:\n%s", o.Result, o.Output)
	}
	for _, name := range []string{"SharedBudgetRespected", "PermanentNeverRetried"} {
		if o := out[name]; o.Result != "pass" {
			t.Errorf("%s: %s, want pass:\n%s", name, o.Result, o.Output)
		}
	}
	if t.Failed() {
		t.Logf("outcomes: %s", strings.Join(func() []string {
			var s []string
			for k, v := range out {
				s = append(s, k+"="+v.Result)
			}
			return s
		}(), ", "))
	}
}

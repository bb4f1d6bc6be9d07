package external

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/stress"
)

func hedgeLoop(name string, do func(context.Context, budget.Budget, time.Duration, bool, func(context.Context) error) error) stress.Loop {
	return stress.Loop{
		Name: name,
		Call: func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
			return do(ctx, b, s.HedgeDelay, s.HedgeAsksBudget, op)
		},
	}
}

// The hedged call that waits for its loser but never cancels it fails
// HedgeLosersCancelled; the same call that cancels it passes. Both wait
// for their losers, so IgnoringOpEndsTheCall passes both.
func TestHedgedCall(t *testing.T) {
	for _, c := range []struct {
		loop stress.Loop
		want string
		says string
	}{
		{hedgeLoop("HedgedDo", HedgedDo), "pass", ""},
		{hedgeLoop("HedgedDoNoCancel", HedgedDoNoCancel), "fail", "the first attempt's context was not cancelled"},
	} {
		t.Run(c.loop.Name, func(t *testing.T) {
			out := stress.IsolatedLoopChecks(t, c.loop, 0, "HedgeLosersCancelled", "IgnoringOpEndsTheCall")
			if out == nil {
				return // a child
			}
			if o := out["HedgeLosersCancelled"]; o.Result != c.want {
				t.Errorf("HedgeLosersCancelled: %s, want %s:\n%s", o.Result, c.want, o.Output)
			} else if !strings.Contains(o.Output, c.says) {
				t.Errorf("HedgeLosersCancelled: %s as expected, but not saying %q:\n%s", o.Result, c.says, o.Output)
			}
			if o := out["IgnoringOpEndsTheCall"]; o.Result != "pass" {
				t.Errorf("IgnoringOpEndsTheCall: %s, want pass:\n%s", o.Result, o.Output)
			}
		})
	}
}

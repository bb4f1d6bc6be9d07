// Package looptrack holds what the adapters of testdata/loops share: the
// bookkeeping that turns a third-party loop's hooks into calls of a
// budget, the classifier of the checks' errors, and the comparison of the
// checks' results with a loop's pinned verdicts. It is a module of its own
// so that a module holding another version of a library (retrygo432) can
// use it without taking the versions testdata/loops requires.
package looptrack

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/stress"
)

// Classify maps the checks' errors onto a budget kind: ErrTransient (and
// anything wrapping it) is a transient failure, a *stress.RetryAfterError a
// throttling one, with its server-supplied delay; anything else, the
// permanent error or an error of the context, is not retryable.
func Classify(err error) (k budget.Kind, delay time.Duration, retryable bool) {
	var ra *stress.RetryAfterError
	switch {
	case errors.Is(err, stress.ErrPermanent):
		return budget.FirstAttempt, 0, false
	case errors.As(err, &ra):
		return budget.Throttled, ra.Delay, true
	case errors.Is(err, stress.ErrTransient):
		return budget.Transient, 0, true
	}
	return budget.FirstAttempt, 0, false
}

// A Tracker is what an adapter keeps of one call to tell the budget what a
// team's integration tells it: Request when the first attempt starts,
// Retry before a retry (which starts the retry when granted), Success
// inside a successful attempt, and, for a budget.InFlightBudget, the end of
// each attempt started (a granted retry that never ran included) and of the
// call; for a budget.FailureCounter, the retryable failure after which the
// loop gave up without asking for a retry. The loops here run their
// attempts one at a time on the caller's goroutine, so a Tracker needs no
// lock.
type Tracker struct {
	b  budget.Budget
	ib budget.InFlightBudget // b, if it counts work in flight
	fc budget.FailureCounter // b, if it counts failures

	started  bool        // Request was called
	kind     budget.Kind // of the attempt running, or of the granted retry to come
	open     bool        // an attempt started (by Request or a granted Retry) has not ended
	lastFail budget.Kind // the kind of the last attempt's retryable failure; FirstAttempt if it had none
	asked    bool        // Retry was asked after the last attempt's failure
}

func NewTracker(b budget.Budget) *Tracker {
	t := &Tracker{b: b}
	t.ib, _ = b.(budget.InFlightBudget)
	t.fc, _ = b.(budget.FailureCounter)
	return t
}

// Begin is called as an attempt's operation begins: the first starts the
// call; a retry was started by the Retry that granted it.
func (t *Tracker) Begin() {
	if !t.started {
		t.started, t.kind, t.open = true, budget.FirstAttempt, true
		t.b.Request()
	}
}

// End ends the attempt open, if any.
func (t *Tracker) End() {
	if t.open {
		t.open = false
		if t.ib != nil {
			t.ib.AttemptEnd(t.kind)
		}
	}
}

// Success is called when an attempt's operation succeeded.
func (t *Tracker) Success() {
	t.b.Success(t.kind)
	t.lastFail = budget.FirstAttempt
	t.End()
}

// Failed is called when an attempt's operation failed: with a retry kind
// when the failure is retryable, else FirstAttempt.
func (t *Tracker) Failed(k budget.Kind) {
	t.lastFail, t.asked = k, false
	t.End()
}

// Retry asks the budget for a retry of kind k; a granted retry starts.
func (t *Tracker) Retry(k budget.Kind) bool {
	t.asked = true
	if !t.b.Retry(k) {
		return false
	}
	t.kind, t.open = k, true
	return true
}

// Finish is called once the loop has returned: it ends a granted retry that
// never ran, tells a FailureCounter of a retryable failure the loop gave up
// after without asking (out of attempts, out of time), and ends the call.
//
// The end of the call, and that last failure, are told here, where the
// adapter sees the loop return: none of the four libraries has a hook at
// the end of every call (retryablehttp's ErrorHandler comes on failure
// only), and backoff.Retry and go-retry's Do none for a failure
// they give up after (retry-go's RetryIf and retryablehttp's CheckRetry are
// called after it, but are not told that it is the last; the adapter knows
// only by counting). So EveryFailureCounted and EveryStartEnds pass by the
// adapter's bookkeeping as much as by the loop's: what they confirm of the
// loop is that it returns the last failure to its caller, runs attempts one
// at a time, and asks the budget where the adapter does.
func (t *Tracker) Finish(ctx context.Context) {
	t.End()
	if t.fc != nil && t.lastFail.IsRetry() && !t.asked && ctx.Err() == nil {
		t.fc.Failed(t.lastFail)
	}
	if t.started && t.ib != nil {
		t.ib.CallEnd()
	}
}

// CheckLoop runs the loop checks on l, each in a child process, logs each
// check's result and the first line of what it said, and compares the
// results with the pinned verdicts: "pass" unless expected says otherwise,
// and, for each entry of says, output that contains it. It returns false
// in a child, where the checks have run and the test must just return.
func CheckLoop(t *testing.T, l stress.Loop, expected, says map[string]string) bool {
	t.Helper()
	outcomes := stress.IsolatedLoopChecks(t, l, 0)
	if outcomes == nil {
		return false
	}
	for _, c := range stress.LoopChecks() {
		o := outcomes[c.Name]
		t.Logf("%-28s %-5s %s", c.Name, o.Result, firstLine(o.Output))
	}
	want := map[string]string{}
	for _, c := range stress.LoopChecks() {
		want[c.Name] = "pass"
	}
	for name, result := range expected {
		want[name] = result
	}
	for _, c := range stress.LoopChecks() {
		name, w := c.Name, want[c.Name]
		if got := outcomes[name].Result; got != w {
			t.Errorf("%s: %s, expected %s:\n%s", name, got, w, outcomes[name].Output)
		} else if s, ok := says[name]; ok && !strings.Contains(outcomes[name].Output, s) {
			t.Errorf("%s: %s as expected, but not saying %q:\n%s", name, got, s, outcomes[name].Output)
		}
	}
	return true
}

// firstLine returns the first line of s that is not blank, trimmed,
// passing over the result lines of the test that enclosed the check in its
// child process, which a passing check's output holds and nothing else.
func firstLine(s string) string {
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "--- ") {
			return line
		}
	}
	return ""
}

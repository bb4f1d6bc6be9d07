package mutants

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/stress"
)

// loopBugs selects the bug a mutant retry loop carries. With no bug set,
// naiveLoop is a correct loop: the checks show that each mutant fails
// because of its bug.
type loopBugs struct {
	noCtxCheck          bool // attempts before checking ctx
	sleep               bool // time.Sleep instead of a select on ctx.Done()
	goroutinePerAttempt bool // runs each attempt in a goroutine and abandons it on cancel
	retryPermanent      bool // retries errors that will never succeed
	askAfterSleep       bool // waits first, then asks the budget
	watcher             bool // starts a ctx watcher and leaves it running on success
	doubleCharge        bool // asks the budget twice per retry
	skipZeroWait        bool // skips the select, and so the ctx check, when the wait is zero
	noLookahead         bool // waits into the deadline and attempts when the timer fires, without looking at ctx again
	waitIntoDeadline    bool // waits into the deadline, then looks at ctx as it should
	elapsedPerAttempt   bool // measures MaxElapsed from the last attempt, not from the start
	uncappedServerDelay bool // waits as long as the server says, past MaxDelay
}

// naiveLoop is a plain retry loop as people write it by hand, with full
// jitter, server delays capped at MaxDelay, and MaxElapsed; bugs breaks it.
func naiveLoop(bugs loopBugs) func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
	return func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
		if !bugs.noCtxCheck && ctx.Err() != nil {
			return ctx.Err()
		}
		start := time.Now()
		b.Request()
		if bugs.watcher {
			// Meant to log or abort in-flight work on cancel; the stop
			// channel that should end it on success was never added.
			go func() { <-ctx.Done() }()
		}
		kind := budget.FirstAttempt
		for n := 1; ; n++ {
			if bugs.elapsedPerAttempt {
				start = time.Now()
			}
			var err error
			if bugs.goroutinePerAttempt {
				done := make(chan error, 1)
				go func() { done <- op(ctx) }()
				select {
				case err = <-done:
				case <-ctx.Done():
					return ctx.Err() // the attempt keeps running
				}
			} else {
				err = op(ctx)
			}
			if err == nil {
				b.Success(kind)
				return nil
			}
			if ctx.Err() != nil && !bugs.skipZeroWait && !bugs.noLookahead {
				return errors.Join(ctx.Err(), err)
			}
			if errors.Is(err, stress.ErrPermanent) && !bugs.retryPermanent {
				return err
			}
			if n >= s.MaxAttempts {
				return err
			}
			next := budget.Transient
			wait := time.Duration(rand.Int64N(int64(min(s.BaseDelay<<min(n-1, 30), s.MaxDelay)) + 1))
			var ra *stress.RetryAfterError
			if errors.As(err, &ra) {
				next, wait = budget.Throttled, min(ra.Delay, s.MaxDelay)
				if bugs.uncappedServerDelay {
					wait = ra.Delay
				}
			}
			if d, ok := ctx.Deadline(); ok && !time.Now().Add(wait).Before(d) && !bugs.noLookahead && !bugs.waitIntoDeadline {
				return err
			}
			if s.MaxElapsed > 0 && time.Since(start)+wait >= s.MaxElapsed {
				return err
			}
			if !bugs.askAfterSleep {
				if !b.Retry(next) {
					return errors.Join(budget.ErrDenied, err)
				}
				if bugs.doubleCharge {
					b.Retry(next)
				}
			}
			if bugs.sleep {
				time.Sleep(wait)
			} else if wait == 0 && bugs.skipZeroWait {
				// No wait, so no select: and no look at ctx either.
			} else {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return errors.Join(ctx.Err(), err)
				case <-t.C:
				}
			}
			if ctx.Err() != nil && !bugs.skipZeroWait && !bugs.noLookahead {
				return errors.Join(ctx.Err(), err)
			}
			if bugs.askAfterSleep && !b.Retry(next) {
				return errors.Join(budget.ErrDenied, err)
			}
			kind = next
		}
	}
}

// A LoopMutant is a deliberately broken retry loop and the loop check that
// must catch it.
type LoopMutant struct {
	Loop     stress.Loop
	CaughtBy string // the name of a stress.LoopCheck
	Bug      string
}

// Loops returns the loop mutants, and CorrectLoop the loop they are built
// from.
func Loops() []LoopMutant {
	m := func(name, check, bug string, b loopBugs) LoopMutant {
		return LoopMutant{Loop: stress.Loop{Name: name, Call: naiveLoop(b)}, CaughtBy: check, Bug: bug}
	}
	return []LoopMutant{
		m("SleepNoSelect", "PromptReturnOnCancel",
			"waits with time.Sleep, so a cancelled call sleeps on (the Go trap the article \"Retry budgets by language\" warns of)",
			loopBugs{sleep: true}),
		m("AttemptBeforeCtxCheck", "NoAttemptOnDoneContext",
			"makes the first attempt without looking at ctx, so a call whose caller has gone still goes out",
			loopBugs{noCtxCheck: true}),
		m("GoroutinePerAttempt", "IgnoringOpEndsTheCall",
			"runs each attempt in a goroutine and returns on cancel, leaving the attempt running after the call",
			loopBugs{goroutinePerAttempt: true}),
		m("RetryPermanent", "PermanentNeverRetried",
			"classifies every error as retryable, so a 400 is sent again and spends budget",
			loopBugs{retryPermanent: true}),
		m("AskAfterSleep", "SharedBudgetRespected",
			"waits out the backoff and only then asks the budget, so a denied call has slept for nothing",
			loopBugs{askAfterSleep: true}),
		m("WatcherLeft", "NoGoroutineOutlivesCall",
			"starts a goroutine that waits on ctx.Done() and never stops it when the call succeeds",
			loopBugs{watcher: true}),
		m("DoubleCharge", "SharedBudgetRespected",
			"asks the budget twice per retry (once to check, once to take), so it drains twice as fast",
			loopBugs{doubleCharge: true}),
		m("SkipZeroWait", "NoAttemptAfterCancel",
			"skips the timer when the backoff comes out as zero, and with it the only look at ctx",
			loopBugs{skipZeroWait: true}),
		m("NoDeadlineLookahead", "NoAttemptOnExpiredDeadline",
			"waits even when the wait ends at the deadline, and attempts as soon as its timer fires",
			loopBugs{noLookahead: true}),
		m("WaitsIntoDeadline", "GiveUpBeforeDeadline",
			"starts a wait that ends at or past the deadline instead of returning at once, so the caller learns of the failure only at its deadline",
			loopBugs{waitIntoDeadline: true}),
		m("ElapsedPerAttempt", "MaxElapsedEndsTheLoop",
			"measures the elapsed limit from the last attempt instead of the start of the call, so fast failures never reach it",
			loopBugs{elapsedPerAttempt: true}),
		m("UncappedServerDelay", "ServerDelayCapped",
			"waits as long as Retry-After says, however long, instead of at most MaxDelay",
			loopBugs{uncappedServerDelay: true}),
	}
}

// CorrectLoop is naiveLoop with no bug: it must pass every loop check.
func CorrectLoop() stress.Loop {
	return stress.Loop{Name: "mutants.CorrectLoop", Call: naiveLoop(loopBugs{})}
}

package mutants

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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
	spinAtLimit         bool // caps each wait by the time left to MaxElapsed, and stops only once past it
	noEndOnWaitCancel   bool // ends an in-flight budget's attempt only once it has run: a retry granted and then cancelled during the backoff never ends
	endOnlyFailures     bool // tells AttemptEnd only of attempts that fail, taking Success for the end of one that succeeds
	callEndTwice        bool // ends the call on success, and again from the deferred end of every call
	noFailedAtLimit     bool // tells a budget that counts failures nothing of the last attempt's failure
	noFailedNoTime      bool // tells a budget that counts failures nothing of a failure after which no time is left
	failedAndAsked      bool // tells Failed of every retryable failure, and asks Retry after it as well
	failedPermanent     bool // tells Failed of a permanent failure too
	noSuccess           bool // never tells the budget of a success
	successFirst        bool // tells every success as a first attempt's, whatever the kind of the attempt
	successTwice        bool // tells a success in the attempt's wrapper, and again on the way out
	successOnGiveUp     bool // tells a permanent failure, which ends the call, as a success
	timerGoroutine      bool // waits on a channel that a goroutine closes after time.Sleep, and leaves it sleeping on a cancel

	// Bugs of the mode with no attempt limit (Settings.NoAttemptCap) only,
	// avast/retry-go v4.3.2's in its Attempts(0) mode among them: without
	// NoAttemptCap the loop is correct.
	uncappedRetryPermanent bool // retries every error, a permanent one included
	uncappedNilOnCancel    bool // returns nil when cancelled during a wait
	uncappedRetryDenied    bool // waits the backoff after a denial and asks again, instead of returning

	// Loops that keep every promise, but cannot bring about the situation
	// a check needs: the check must say "premise not reached".
	jitterNeverZero    bool // every backoff wait is at least 1ns, whatever FixedDelay says
	alwaysFullJitter   bool // every backoff wait is drawn in [0, ceiling], whatever FixedDelay and NoJitter say
	ignoreServerDelay  bool // backs off as from any failure, whatever the server asks
	jitterServerDelay  bool // adds up to a tenth of a server delay, at least 1ns, to it
	waitCap            bool // never waits more than a second, whatever MaxDelay says
	shunLongDelay      bool // gives up at once when the server asks for more than a minute
	attemptsCap        bool // makes at most 5 attempts, whatever MaxAttempts says
	neverRetries       bool // returns the first failure
	ignoreNoAttemptCap bool // stops at MaxAttempts whatever NoAttemptCap says
}

// naiveLoop is a plain retry loop as people write it by hand, with full
// jitter (or none, or a fixed delay, as Settings ask), server delays capped
// at MaxDelay, and MaxElapsed. It makes at most MaxAttempts attempts, or,
// with Settings.NoAttemptCap, as many as the other rules allow: it then
// stops only on a success, a permanent failure, a denial, the deadline or
// the elapsed limit, or a cancel. It tells the budget of the success of
// the attempt that succeeds, once, with the attempt's kind. It tells an
// in-flight budget of the end of each attempt it started, the first and
// every granted retry, whether the attempt ran or not, and then of the end
// of the call; bugs breaks it.
func naiveLoop(bugs loopBugs) func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
	return func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
		if !bugs.noCtxCheck && ctx.Err() != nil {
			return ctx.Err()
		}
		start := time.Now()
		b.Request()
		ib, _ := b.(budget.InFlightBudget)
		end := func(k budget.Kind) {
			if ib != nil {
				ib.AttemptEnd(k)
			}
		}
		if ib != nil {
			defer ib.CallEnd()
		}
		// tell tells a budget that counts failures of err, a failure
		// after which the loop asks no retry, unless a bug skips it.
		tell := func(err error, skip bool) {
			if !skip {
				failed(b, err)
			}
		}
		if bugs.watcher {
			// Meant to log or abort in-flight work on cancel; the stop
			// channel that should end it on success was never added.
			go func() { <-ctx.Done() }()
		}
		capped := !s.NoAttemptCap || bugs.ignoreNoAttemptCap
		uncapped := func(bug bool) bool { return bug && s.NoAttemptCap }
		// cancelled is what the loop returns when ctx is done during the
		// wait after a failure with err.
		cancelled := func(err error) error {
			if uncapped(bugs.uncappedNilOnCancel) {
				return nil
			}
			return errors.Join(ctx.Err(), err)
		}
		kind := budget.FirstAttempt
		// attempt runs op once, as an attempt of the given kind.
		attempt := func(kind budget.Kind) error {
			err := op(ctx)
			if err == nil && bugs.successTwice {
				b.Success(kind)
			}
			return err
		}
		for n := 1; ; n++ {
			if bugs.elapsedPerAttempt {
				start = time.Now()
			}
			var err error
			if bugs.goroutinePerAttempt {
				done := make(chan error, 1)
				go func() { done <- attempt(kind) }()
				select {
				case err = <-done:
				case <-ctx.Done():
					end(kind)
					return ctx.Err() // the attempt keeps running
				}
			} else {
				err = attempt(kind)
			}
			if err == nil {
				switch {
				case bugs.noSuccess:
				case bugs.successFirst:
					b.Success(budget.FirstAttempt)
				default:
					b.Success(kind)
				}
				if !bugs.endOnlyFailures {
					end(kind)
				}
				if bugs.callEndTwice && ib != nil {
					ib.CallEnd()
				}
				return nil
			}
			permanent := errors.Is(err, stress.ErrPermanent)
			if permanent && bugs.successOnGiveUp {
				// The call is over, and the caller has its answer.
				b.Success(kind)
			}
			end(kind)
			if ctx.Err() != nil && !bugs.skipZeroWait && !bugs.noLookahead {
				return errors.Join(ctx.Err(), err)
			}
			if permanent && !bugs.retryPermanent && !uncapped(bugs.uncappedRetryPermanent) {
				tell(err, !bugs.failedPermanent)
				return err
			}
			if bugs.failedAndAsked {
				tell(err, false)
			}
			if capped && n >= s.MaxAttempts {
				tell(err, bugs.noFailedAtLimit || bugs.failedAndAsked)
				return err
			}
			if bugs.neverRetries {
				tell(err, false)
				return err
			}
			if bugs.attemptsCap && n >= 5 {
				tell(err, false)
				return err
			}
			next, wait := naiveWait(bugs, s, n, err)
			if wait < 0 {
				tell(err, false)
				return err // the server asks for too long
			}
			if d, ok := ctx.Deadline(); ok && !time.Now().Add(wait).Before(d) && !bugs.noLookahead && !bugs.waitIntoDeadline {
				tell(err, bugs.noFailedNoTime || bugs.failedAndAsked)
				return err
			}
			if s.MaxElapsed > 0 && bugs.spinAtLimit {
				// Off by one: at the limit, the time left is zero, and so
				// is the wait, and the loop goes round again at once.
				left := s.MaxElapsed - time.Since(start)
				if left < 0 {
					tell(err, false)
					return err
				}
				wait = min(wait, left)
			} else if s.MaxElapsed > 0 && time.Since(start)+wait >= s.MaxElapsed {
				tell(err, bugs.noFailedNoTime || bugs.failedAndAsked)
				return err
			}
			if !bugs.askAfterSleep {
				for !b.Retry(next) {
					if !uncapped(bugs.uncappedRetryDenied) {
						return errors.Join(budget.ErrDenied, err)
					}
					// Denied: wait, and ask again.
					t := time.NewTimer(wait)
					select {
					case <-ctx.Done():
						t.Stop()
						return errors.Join(ctx.Err(), err)
					case <-t.C:
					}
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
				var fired <-chan time.Time
				stop := func() {}
				if bugs.timerGoroutine {
					// A timer of its own, which nothing stops: on a
					// cancel it sleeps on after the call.
					c := make(chan time.Time)
					go func() {
						time.Sleep(wait)
						close(c)
					}()
					fired = c
				} else {
					t := time.NewTimer(wait)
					fired, stop = t.C, func() { t.Stop() }
				}
				select {
				case <-ctx.Done():
					stop()
					// The retry was granted, and so started: it ends,
					// though it never runs.
					if !bugs.askAfterSleep && !bugs.noEndOnWaitCancel {
						end(next)
					}
					return cancelled(err)
				case <-fired:
				}
			}
			if ctx.Err() != nil && !bugs.skipZeroWait && !bugs.noLookahead {
				if !bugs.askAfterSleep && !bugs.noEndOnWaitCancel {
					end(next)
				}
				return cancelled(err)
			}
			if bugs.askAfterSleep && !b.Retry(next) {
				return errors.Join(budget.ErrDenied, err)
			}
			kind = next
		}
	}
}

// failed tells b, if it counts failures, of a failure with err after
// which the loop asks no retry.
func failed(b budget.Budget, err error) {
	if fc, ok := b.(budget.FailureCounter); ok {
		fc.Failed(failureKind(err))
	}
}

// failureKind returns the kind of retry a failure with err calls for.
func failureKind(err error) budget.Kind {
	if errors.As(err, new(*stress.RetryAfterError)) {
		return budget.Throttled
	}
	return budget.Transient
}

// naiveWait returns the kind of the retry after attempt n failed with err,
// and the wait before it.
func naiveWait(bugs loopBugs, s stress.Settings, n int, err error) (budget.Kind, time.Duration) {
	ceiling := min(s.BaseDelay<<min(n-1, 30), s.MaxDelay)
	var wait time.Duration
	switch {
	case bugs.jitterNeverZero:
		wait = 1 + time.Duration(rand.Int64N(int64(ceiling)+1))
	case bugs.alwaysFullJitter:
		wait = time.Duration(rand.Int64N(int64(ceiling) + 1))
	case s.FixedDelay:
		wait = s.BaseDelay
	case s.NoJitter:
		wait = ceiling
	default:
		wait = time.Duration(rand.Int64N(int64(ceiling) + 1))
	}
	var ra *stress.RetryAfterError
	if !errors.As(err, &ra) || bugs.ignoreServerDelay {
		if bugs.waitCap {
			wait = min(wait, time.Second)
		}
		return budget.Transient, wait
	}
	wait = ra.Delay
	if bugs.jitterServerDelay {
		wait += 1 + time.Duration(rand.Int64N(int64(ra.Delay/10)+1))
	}
	if !bugs.uncappedServerDelay {
		wait = min(wait, s.MaxDelay)
	}
	if bugs.waitCap {
		wait = min(wait, time.Second)
	}
	if bugs.shunLongDelay && ra.Delay > time.Minute {
		wait = -1 // give up
	}
	return budget.Throttled, wait
}

// A LoopMutant is a deliberately broken retry loop and the loop check that
// must catch it.
type LoopMutant struct {
	Loop     stress.Loop
	CaughtBy string // the name of a stress.LoopCheck
	Bug      string
	// Premise marks a loop that keeps the promise but cannot bring about
	// the situation CaughtBy needs: the check must fail it with "premise
	// not reached", where it used to pass for want of a test.
	Premise bool
	// Interleaving marks a bug that needs a goroutine preempted in a
	// window of nanoseconds: the check catches it when the loop's code is
	// instrumented and runs under control (cmd/budgetcheck), and only by
	// chance when it runs freely.
	Interleaving bool
}

// noHedging is the Skip of the loops built on naiveLoop, which does not
// hedge.
var noHedging = map[string]string{"HedgeLosersCancelled": "naiveLoop does not hedge"}

// Loops returns the loop mutants; CorrectLoop and CorrectHedgeLoop are the
// loops they are built from.
func Loops() []LoopMutant {
	m := func(name, check, bug string, b loopBugs) LoopMutant {
		return LoopMutant{Loop: stress.Loop{Name: name, Call: naiveLoop(b), Skip: noHedging}, CaughtBy: check, Bug: bug}
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
		m("SpinAtElapsedLimit", "MaxElapsedEndsTheLoop",
			"caps each wait by the time left to MaxElapsed but stops only once past it, so at the limit it retries with no wait, forever, while the clock stands still",
			loopBugs{spinAtLimit: true}),
		hedge("HedgeNoJoin", "IgnoringOpEndsTheCall",
			"hedges, and returns as soon as it has an answer or the caller cancels, without waiting for the attempts it cancelled",
			hedgeBugs{noJoin: true}),
		interleaving(hedge("HedgeCounterJoin", "IgnoringOpEndsTheCall",
			"hedges, and waits for its cancelled attempts by reading results while a count of attempts in flight is positive, but an attempt lowers the count only after handing over its result: preempted in between, it leaves the loop waiting for a result that never comes",
			hedgeBugs{counterJoin: true})),
		hedge("HedgeWinnerNoJoin", "IgnoringOpEndsTheCall",
			"hedges, and waits for its cancelled attempts when the call fails or is cancelled, but not when an attempt wins, so the losers outlive a successful call",
			hedgeBugs{winnerReturnsEarly: true}),
		m("NoEndOnBackoffCancel", "EveryStartEnds",
			"tells an in-flight budget of an attempt's end only once the attempt has run, so a retry granted and then cancelled during the backoff wait never ends, and holds its permit for ever",
			loopBugs{noEndOnWaitCancel: true}),
		m("SuccessIsTheEnd", "EveryStartEnds",
			"tells an in-flight budget of the end only of an attempt that fails, taking Success for the end of one that succeeds, so every call that succeeds leaves an attempt in flight",
			loopBugs{endOnlyFailures: true}),
		m("CallEndTwice", "EveryStartEnds",
			"tells an in-flight budget of the end of a call that succeeds, and again from the end it defers for every call, so the budget counts one call fewer in flight for each success",
			loopBugs{callEndTwice: true}),
		hedge("HedgeLosersNotEnded", "EveryStartEnds",
			"hedges, and tells an in-flight budget of the end of the attempts whose results it reads, but not of the losers it cancels and waits for, so every hedged call leaves an attempt in flight",
			hedgeBugs{noLoserEnd: true}),
		m("LastFailureUncounted", "EveryFailureCounted",
			"asks the budget before each retry, but tells it nothing of the failure after which attempts ran out, so a budget that counts failures (gRPC's throttling) keeps a token for every call that exhausts its attempts",
			loopBugs{noFailedAtLimit: true}),
		m("NoTimeUncounted", "EveryFailureCounted",
			"gives up when the next wait would pass the deadline or MaxElapsed without telling a budget that counts failures of the failure",
			loopBugs{noFailedNoTime: true}),
		m("FailedAndAsked", "EveryFailureCounted",
			"tells a budget that counts failures of every retryable failure, and then asks it for the retry as well, so each retried failure is charged twice",
			loopBugs{failedAndAsked: true}),
		m("PermanentCounted", "EveryFailureCounted",
			"tells a budget that counts failures of a permanent failure too, which is no failure of the dependency's health",
			loopBugs{failedPermanent: true}),
		m("NoSuccessReported", "EverySuccessReported",
			"never tells the budget of a success, so a budget that earns from successes (a token bucket's refund, gRPC's throttling) only ever drains",
			loopBugs{noSuccess: true}),
		m("SuccessKindAlwaysFirst", "EverySuccessReported",
			"tells the budget of every success as a first attempt's, so a retry that succeeds earns a first attempt's bonus instead of its retry's refund",
			loopBugs{successFirst: true}),
		m("SuccessReportedTwice", "EverySuccessReported",
			"tells the budget of a success in the wrapper that runs the attempt and again on the way out, so every success counts twice",
			loopBugs{successTwice: true}),
		m("SuccessOnGiveUp", "EverySuccessReported",
			"tells the budget of a success when it gives up after a permanent error, taking the end of the call for a success it never saw",
			loopBugs{successOnGiveUp: true}),
		hedge("HedgeLoserSuccess", "EverySuccessReported",
			"hedges, and tells the budget of a success from the goroutine of each attempt that succeeds, so a loser that succeeds too, or an attempt that succeeds after the call was cancelled, is told as well",
			hedgeBugs{successInAttempt: true}),
		hedge("HedgeNeverCancels", "HedgeLosersCancelled",
			"hedges, and when an attempt wins waits for the losers without cancelling them, so a successful call lasts as long as its slowest attempt",
			hedgeBugs{noCancelOnWin: true}),
		hedge("HedgeIgnoresBudgetSetting", "HedgeLosersCancelled",
			"hedges without asking the budget even when HedgeAsksBudget says a hedge is a retry the budget must grant, so its hedges escape the budget",
			hedgeBugs{hedgeNeverAsks: true}),
		m("BackoffTimerLeft", "NoGoroutineOutlivesCall",
			"waits on a channel that a goroutine closes after time.Sleep, so on a cancel during the wait it returns at once but leaves that goroutine sleeping after the call",
			loopBugs{timerGoroutine: true}),
		m("UncappedRetriesPermanent", "UncappedLoopEnds",
			"with no attempt limit, retries every error, a permanent one included, for ever (avast/retry-go v4.3.2 in its Attempts(0) mode)",
			loopBugs{uncappedRetryPermanent: true}),
		m("UncappedNilOnCancel", "UncappedLoopEnds",
			"with no attempt limit, returns nil when the caller cancels during a wait, so a call that never succeeded looks like a success (avast/retry-go v4.3.2 in its Attempts(0) mode)",
			loopBugs{uncappedNilOnCancel: true}),
		m("UncappedIgnoresDenial", "UncappedLoopEnds",
			"with no attempt limit, waits the backoff after a denied retry and asks again, instead of returning the failure at once",
			loopBugs{uncappedRetryDenied: true}),
		premise(m("JitterNeverZero", "NoAttemptAfterCancel",
			"never waits less than 1ns before a retry, and ignores FixedDelay, so there is no retry without a wait, where only a look at ctx can stop it",
			loopBugs{jitterNeverZero: true})),
		premise(m("ServerDelayJittered", "NoAttemptOnExpiredDeadline",
			"adds jitter to a server delay, so no wait ends at the deadline's instant",
			loopBugs{jitterServerDelay: true})),
		premise(m("WaitCapped", "GiveUpBeforeDeadline",
			"never waits more than a second, whatever MaxDelay and the server say, so no wait it begins reaches a deadline 3s away",
			loopBugs{waitCap: true})),
		premise(m("ShunsLongServerDelay", "PromptReturnOnCancel",
			"gives up at once when the server asks for more than a minute, so it is not waiting when the caller cancels",
			loopBugs{shunLongDelay: true})),
		premise(m("AttemptsCapped", "MaxElapsedEndsTheLoop",
			"makes at most 5 attempts whatever MaxAttempts says, so the elapsed limit is never reached",
			loopBugs{attemptsCap: true})),
		premise(m("IgnoresServerDelay", "ServerDelayCapped",
			"backs off from a server's delay as from any failure, so there is no server delay to cap",
			loopBugs{ignoreServerDelay: true})),
		premise(m("NeverRetries", "PermanentNeverRetried",
			"returns the first failure, transient or not, so there is no retry to withhold",
			loopBugs{neverRetries: true})),
		premise(m("AlwaysFullJitter", "EveryFailureCounted",
			"draws every backoff wait at random below its ceiling, whatever FixedDelay and NoJitter say (an adapter that leaves a library's default jitter on), so whether a wait of BaseDelay 1h reaches a deadline 1s away is chance",
			loopBugs{alwaysFullJitter: true})),
		premise(m("IgnoresNoAttemptCap", "UncappedLoopEnds",
			"stops at MaxAttempts whatever NoAttemptCap says, so it never runs without an attempt limit",
			loopBugs{ignoreNoAttemptCap: true})),
	}
}

func hedge(name, check, bug string, b hedgeBugs) LoopMutant {
	return LoopMutant{Loop: stress.Loop{Name: name, Call: hedgedLoop(b)}, CaughtBy: check, Bug: bug}
}

func premise(m LoopMutant) LoopMutant {
	m.Premise = true
	return m
}

func interleaving(m LoopMutant) LoopMutant {
	m.Interleaving = true
	return m
}

// hedgeDelay is how long hedgedLoop lets an attempt run before it starts
// another, unless Settings.HedgeDelay says otherwise.
const hedgeDelay = 5 * time.Millisecond

// hedgeBugs selects the bug a hedging mutant carries.
type hedgeBugs struct {
	noJoin             bool // never waits for the attempts it cancels
	winnerReturnsEarly bool // waits for them, except after a win
	// counterJoin waits for them by draining results while a count of
	// attempts in flight is positive; an attempt lowers the count only
	// after it has handed over its result, so the count can still include
	// an attempt whose result the loop has read, and the loop waits for a
	// result that never comes. It needs the attempt to be preempted
	// between the two, a window of nanoseconds.
	counterJoin bool
	// noLoserEnd tells an in-flight budget of the end of the attempts
	// whose results it reads, the winner's among them, and not of the
	// losers it cancels, nor of a retry granted and never run.
	noLoserEnd bool
	// noCancelOnWin waits for the losers when an attempt wins, but
	// without cancelling them first.
	noCancelOnWin bool
	// hedgeNeverAsks starts every hedge without asking the budget,
	// whatever Settings.HedgeAsksBudget says.
	hedgeNeverAsks bool
	// successInAttempt tells the budget of a success from the goroutine
	// of the attempt that succeeds, as it succeeds, and so of a loser's
	// success too, or of one that comes after a cancel.
	successInAttempt bool
}

// hedgedLoop is a hedging retry loop: while an attempt runs, it starts
// another, a hedge, every Settings.HedgeDelay (hedgeDelay when that is
// zero), up to MaxAttempts in all (no limit with Settings.NoAttemptCap), and
// the first success wins. With Settings.HedgeAsksBudget each hedge is a
// transient retry the budget must grant first, and a hedge denied is not
// started; without it, a hedge does not ask the budget. A failure with no
// attempt left running is retried after a backoff (or the server's delay),
// as naiveLoop retries. It tells the budget of the winner's success, once,
// with its kind: Transient for a granted hedge, and for a hedge that did not
// ask the budget, the kind of the attempt it hedges (the first attempt or
// the last retry granted), the only attempt the budget knows of; a hedge
// that refunded a Transient retry never charged would overpay a token
// bucket. Before it returns, it cancels the attempts still running and waits
// for them. It tells an in-flight budget of the end of each attempt it
// started through the budget (the first, a granted retry, a granted hedge),
// counted by kind since several are in flight at once: when it reads the
// attempt's result, or, for a loser or a granted retry that never ran, once
// the losers have returned; then of the end of the call. A hedge that did
// not ask the budget started nothing there and has no end. bugs breaks that.
func hedgedLoop(bugs hedgeBugs) func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
	return func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		b.Request()
		ib, _ := b.(budget.InFlightBudget)
		var open [budget.Throttled + 1]int // attempts started and not ended, by kind
		open[budget.FirstAttempt] = 1
		ended := func(k budget.Kind) {
			if ib != nil && open[k] > 0 {
				open[k]--
				ib.AttemptEnd(k)
			}
		}
		type result struct {
			err      error
			kind     budget.Kind
			budgeted bool // started by Request or by a granted Retry
		}
		delay := hedgeDelay
		if s.HedgeDelay > 0 {
			delay = s.HedgeDelay
		}
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		var wg sync.WaitGroup
		results := make(chan result)
		finished := make(chan struct{}) // closed when the call is decided: no one reads results then
		running, n := 0, 0
		hedged := budget.FirstAttempt // the kind of the last attempt started through the budget, bar hedges
		// more says whether the limit on attempts leaves room for another.
		more := func() bool { return s.NoAttemptCap || n < s.MaxAttempts }
		var inflight atomic.Int32 // counterJoin's count
		launch := func(kind budget.Kind, budgeted bool) {
			n++
			running++
			if bugs.counterJoin {
				inflight.Add(1)
				go func() {
					results <- result{op(actx), kind, budgeted}
					inflight.Add(-1)
				}()
				return
			}
			wg.Go(func() {
				r := result{op(actx), kind, budgeted}
				if r.err == nil && bugs.successInAttempt {
					b.Success(kind)
				}
				select {
				case results <- r:
				case <-finished:
				}
			})
		}
		// endAll ends the attempts still open, the losers and a retry
		// granted and never run, and then the call.
		endAll := func() {
			if ib == nil {
				return
			}
			for k := range open {
				for !bugs.noLoserEnd && open[k] > 0 {
					ended(budget.Kind(k))
				}
			}
			ib.CallEnd()
		}
		finish := func(err error, won bool) error {
			if bugs.counterJoin {
				cancel()
				for inflight.Load() > 0 {
					<-results // a loser's
				}
				endAll()
				return err
			}
			close(finished)
			if !won || !bugs.noCancelOnWin {
				cancel()
			}
			if !bugs.noJoin && !(won && bugs.winnerReturnsEarly) {
				wg.Wait()
			}
			endAll()
			return err
		}
		launch(budget.FirstAttempt, true)
		timer := time.NewTimer(delay)
		defer timer.Stop()
		pending := false // the timer is a backoff: a granted retry starts when it fires
		next := budget.Transient
		var last error
		for {
			select {
			case r := <-results:
				running--
				if r.err == nil {
					if !bugs.successInAttempt {
						b.Success(r.kind)
					}
					if r.budgeted {
						ended(r.kind)
					}
					return finish(nil, true)
				}
				if r.budgeted {
					ended(r.kind)
				}
				last = r.err
				switch {
				case ctx.Err() != nil:
					return finish(errors.Join(ctx.Err(), r.err), false)
				case errors.Is(r.err, stress.ErrPermanent):
					return finish(r.err, false)
				case running > 0:
					continue // the others may yet win
				case !more():
					failed(b, r.err)
					return finish(r.err, false)
				}
				kind, wait := naiveWait(loopBugs{}, s, n, r.err)
				if d, ok := ctx.Deadline(); ok && !time.Now().Add(wait).Before(d) {
					failed(b, r.err)
					return finish(r.err, false)
				}
				if s.MaxElapsed > 0 && time.Since(start)+wait >= s.MaxElapsed {
					failed(b, r.err)
					return finish(r.err, false)
				}
				if !b.Retry(kind) {
					return finish(errors.Join(budget.ErrDenied, r.err), false)
				}
				open[kind]++
				next, pending = kind, true
				timer.Reset(wait)
			case <-timer.C:
				if ctx.Err() != nil {
					return finish(errors.Join(ctx.Err(), last), false)
				}
				if pending {
					if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
						return finish(errors.Join(context.DeadlineExceeded, last), false)
					}
					pending = false
					hedged = next
					launch(next, true)
				} else if running > 0 && more() {
					switch {
					case !s.HedgeAsksBudget || bugs.hedgeNeverAsks:
						// A hedge the budget knows nothing of: to it,
						// a copy of the attempt it hedges.
						launch(hedged, false)
					case b.Retry(budget.Transient):
						open[budget.Transient]++
						launch(budget.Transient, true) // a hedge, granted
					}
				}
				if more() {
					timer.Reset(delay)
				}
			case <-ctx.Done():
				return finish(errors.Join(ctx.Err(), last), false)
			}
		}
	}
}

// CorrectLoop is naiveLoop with no bug: it must pass every loop check.
func CorrectLoop() stress.Loop {
	return stress.Loop{Name: "mutants.CorrectLoop", Call: naiveLoop(loopBugs{}), Skip: noHedging}
}

// CorrectHedgeLoop is hedgedLoop with no bug: it must pass every loop
// check.
func CorrectHedgeLoop() stress.Loop {
	return stress.Loop{Name: "mutants.CorrectHedge", Call: hedgedLoop(hedgeBugs{})}
}

package stress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/control"
	"github.com/retrybudget/retrybudget/internal/sched"
)

// The EveryStartEnds check. An in-flight budget (budget.InFlightBudget:
// Envoy's retry_budget, Istio's, failsafe-go's) counts the attempts and the
// calls in flight, so a loop must tell it when each ends: an attempt the
// loop started and never ended holds its permit for ever. The check hands
// the loop an in-flight spy budget, drives one call down each path out of a
// loop, and checks the structure of what the budget was told.

// endsOp is what happened, in the log of an inFlightSpy: a call the loop
// made on the budget, or a mark of the check's own.
type endsOp uint8

const (
	evRequest endsOp = iota
	evRetry
	evSuccess
	evAttemptEnd
	evCallEnd
	// The check's marks.
	evBegin    // an attempt's operation begins
	evFinish   // and returns
	evCancel   // the check cancels the call
	evReturned // the loop's Call returns
)

// An endsEvent is one entry of the log.
type endsEvent struct {
	op      endsOp
	kind    budget.Kind // of Retry, Success, AttemptEnd
	granted bool        // of Retry
	n       int         // the attempt's number, from 1, of evBegin and evFinish
	err     error       // of evFinish and evReturned
}

// budgetCall reports whether e is a call the loop made on the budget.
func (e endsEvent) budgetCall() bool { return e.op <= evCallEnd }

func (e endsEvent) String() string {
	switch e.op {
	case evRequest:
		return "Request"
	case evRetry:
		if e.granted {
			return fmt.Sprintf("Retry(%v)=granted", e.kind)
		}
		return fmt.Sprintf("Retry(%v)=denied", e.kind)
	case evSuccess:
		return fmt.Sprintf("Success(%v)", e.kind)
	case evAttemptEnd:
		return fmt.Sprintf("AttemptEnd(%v)", e.kind)
	case evCallEnd:
		return "CallEnd"
	case evBegin:
		return fmt.Sprintf("[attempt %d runs]", e.n)
	case evFinish:
		return fmt.Sprintf("[attempt %d returns %s]", e.n, errName(e.err))
	case evCancel:
		return "[the caller cancels]"
	case evReturned:
		return fmt.Sprintf("[Call returns %s]", errName(e.err))
	}
	return fmt.Sprintf("endsOp(%d)", e.op)
}

// errName names the checks' errors err wraps, briefly, for a log.
func errName(err error) string {
	if err == nil {
		return "nil"
	}
	var names []string
	for _, e := range []struct {
		err  error
		name string
	}{{context.Canceled, "context.Canceled"}, {context.DeadlineExceeded, "context.DeadlineExceeded"}, {ErrPermanent, "ErrPermanent"}, {ErrTransient, "ErrTransient"}} {
		if errors.Is(err, e.err) {
			names = append(names, e.name)
		}
	}
	if errors.As(err, new(*RetryAfterError)) {
		names = append(names, "RetryAfterError")
	}
	if len(names) == 0 {
		return "an error"
	}
	return strings.Join(names, "+")
}

// inFlightSpy is the in-flight budget of one call of EveryStartEnds. It
// grants every retry (or, with deny, none), and logs what the loop tells
// it, interleaved with the check's marks, in the order they happened. A
// loop may call it from goroutines of its own.
type inFlightSpy struct {
	deny bool

	mu  sync.Mutex
	log []endsEvent
}

var _ budget.InFlightBudget = (*inFlightSpy)(nil)

func (s *inFlightSpy) mark(e endsEvent) {
	s.mu.Lock()
	s.log = append(s.log, e)
	s.mu.Unlock()
}

func (s *inFlightSpy) Request() { s.mark(endsEvent{op: evRequest}) }

func (s *inFlightSpy) Retry(k budget.Kind) bool {
	ok := !s.deny && k.IsRetry()
	s.mark(endsEvent{op: evRetry, kind: k, granted: ok})
	return ok
}

func (s *inFlightSpy) Success(k budget.Kind)    { s.mark(endsEvent{op: evSuccess, kind: k}) }
func (s *inFlightSpy) AttemptEnd(k budget.Kind) { s.mark(endsEvent{op: evAttemptEnd, kind: k}) }
func (s *inFlightSpy) CallEnd()                 { s.mark(endsEvent{op: evCallEnd}) }

// events returns the log so far.
func (s *inFlightSpy) events() []endsEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]endsEvent(nil), s.log...)
}

// retries counts the Retry calls so far that were granted and denied.
func (s *inFlightSpy) retries() (granted, denied int) {
	for _, e := range s.events() {
		if e.op == evRetry && e.granted {
			granted++
		} else if e.op == evRetry {
			denied++
		}
	}
	return granted, denied
}

// joinEvents lists evs, for a message.
func joinEvents(evs []endsEvent) string {
	if len(evs) == 0 {
		return "nothing"
	}
	parts := make([]string, len(evs))
	for i, e := range evs {
		parts[i] = e.String()
	}
	return strings.Join(parts, ", ")
}

// kindCounts counts attempts by kind.
type kindCounts map[budget.Kind]int

func (c kindCounts) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// String lists the counts, for example "1 first attempt, 2 transient
// retries".
func (c kindCounts) String() string {
	var parts []string
	for _, k := range []budget.Kind{budget.FirstAttempt, budget.Transient, budget.Throttled} {
		if c[k] > 0 {
			parts = append(parts, attempts(c[k], k))
		}
	}
	for k, v := range c {
		if v > 0 && k != budget.FirstAttempt && !k.IsRetry() {
			parts = append(parts, attempts(v, k))
		}
	}
	return strings.Join(parts, " and ")
}

// attempts says "n attempts of kind k" in words.
func attempts(n int, k budget.Kind) string {
	what := "first attempt"
	if k != budget.FirstAttempt {
		what = k.String() + " retry"
	}
	if n == 1 {
		return "1 " + what
	}
	if k != budget.FirstAttempt {
		return fmt.Sprintf("%d %s retries", n, k)
	}
	return fmt.Sprintf("%d first attempts", n)
}

// endsProblems returns what is wrong with the structure of one call's log:
//
//   - Each start (Request starts the first attempt; each granted Retry, a
//     retry of its kind) has exactly one AttemptEnd of its kind. An
//     attempt ends only once its operation has returned (or never ran),
//     and before the next attempt starts, unless the next is a hedge,
//     started while the attempts before it still run. Starts and ends are
//     counted by kind, so a loop that hedges, with several attempts in
//     flight at once, is held to the same.
//   - Success comes only while an attempt of its kind is open, before its
//     end.
//   - CallEnd comes exactly once, after the end of every attempt, before
//     the loop's Call returns, and nothing comes after it.
func endsProblems(evs []endsEvent) []string {
	var problems []string
	open, starts := kindCounts{}, kindCounts{}
	running, begun := 0, 0
	requested, callEnded, returned := false, false, false
	var openAtCallEnd kindCounts
	for i, e := range evs {
		at := fmt.Sprintf("event %d, %v", i+1, e)
		if e.budgetCall() && returned {
			problems = append(problems, at+", came after the call returned: the loop must tell the budget before its Call returns")
		} else if (e.budgetCall() && e.op != evCallEnd || e.op == evBegin) && callEnded {
			problems = append(problems, at+", came after CallEnd: the call had ended")
		}
		switch e.op {
		case evBegin:
			running++
			begun++
		case evFinish:
			running--
		case evReturned:
			returned = true
		case evRequest:
			if requested {
				problems = append(problems, at+": a second Request in one call")
				continue
			}
			requested = true
			open[budget.FirstAttempt]++
			starts[budget.FirstAttempt]++
		case evRetry:
			if !e.granted {
				continue
			}
			if n := open.total(); n > running {
				problems = append(problems, fmt.Sprintf("%s, started a retry before the end of %v, with %d operation(s) running: an attempt must end before the next starts (only a hedge, started while the attempts before it run, may overlap them)", at, open, running))
			}
			open[e.kind]++
			starts[e.kind]++
		case evSuccess:
			k := e.kind
			if !k.IsRetry() {
				k = budget.FirstAttempt
			}
			if open[k] == 0 {
				problems = append(problems, fmt.Sprintf("%s, with no %s open: a success is told inside its attempt, before the attempt's end", at, strings.TrimPrefix(attempts(1, k), "1 ")))
			}
		case evAttemptEnd:
			if open[e.kind] == 0 {
				problems = append(problems, fmt.Sprintf("%s, with no %s open (%v started in all): an end told twice, or of the wrong kind", at, strings.TrimPrefix(attempts(1, e.kind), "1 "), starts))
				continue
			}
			open[e.kind]--
			if n := open.total(); running > n {
				problems = append(problems, fmt.Sprintf("%s, while its operation still ran (%d operation(s) running, %d attempt(s) left open): an attempt ends once its operation has returned", at, running, n))
			}
		case evCallEnd:
			if callEnded {
				problems = append(problems, at+": a second CallEnd in one call")
				continue
			}
			callEnded = true
			if open.total() > 0 {
				openAtCallEnd = kindCounts{}
				for k, v := range open {
					openAtCallEnd[k] = v
				}
			}
			if running > 0 {
				problems = append(problems, fmt.Sprintf("%s, while %d operation(s) still ran: the call ends after its last attempt", at, running))
			}
		}
	}
	switch {
	case !requested:
		// The loop made no call of the budget, or an end without a
		// Request; the latter shows above.
		if len(problems) == 0 && begun > 0 {
			problems = append(problems, fmt.Sprintf("%d attempt(s) ran, and the loop never called Request", begun))
		}
	case open.total() > 0:
		msg := fmt.Sprintf("%v started and never ended", open)
		if starts.total() > begun {
			msg += fmt.Sprintf(" (%d started, %d ran: a retry granted whose attempt never ran, because the call ended first, during the backoff wait say, must still end)", starts.total(), begun)
		}
		problems = append(problems, msg)
	case openAtCallEnd != nil:
		problems = append(problems, fmt.Sprintf("CallEnd came before the end of %v: the call ends after the end of its last attempt", openAtCallEnd))
	}
	if requested && !callEnded {
		problems = append(problems, "no CallEnd: the call never ended")
	}
	return problems
}

// An endsPath is one path out of a loop that EveryStartEnds drives a call
// down.
type endsPath struct {
	name string
	s    Settings
	deny bool // the budget denies every retry
	// op is the attempt's operation; cancel cancels the call.
	op func(ctx context.Context, n int, cancel func()) error
	// inWait has the check cancel the call 1ms in, while the loop waits to
	// retry, instead of waiting for it to return.
	inWait bool
	// expected is the premise in words; reached says whether the call
	// brought it about (for inWait, the moment of the cancel is judged in
	// the run itself).
	expected string
	reached  func(sp *inFlightSpy, c counts, res result) bool
}

func endsPaths() []endsPath {
	transient := func(context.Context, int, func()) error { return ErrTransient }
	return []endsPath{
		{
			name: "Success", s: settings,
			op:       func(context.Context, int, func()) error { return nil },
			expected: "a call whose first attempt succeeds",
			reached:  func(_ *inFlightSpy, c counts, res result) bool { return c.n == 1 && res.err == nil },
		},
		{
			name: "SuccessOnRetry", s: settings,
			op:       func(ctx context.Context, n int, _ func()) error { return failsOnce(ErrTransient)(ctx, n) },
			expected: "a granted retry that succeeds, after a first attempt that failed with a transient error",
			reached: func(sp *inFlightSpy, c counts, res result) bool {
				g, _ := sp.retries()
				return g >= 1 && c.n >= 2 && res.err == nil
			},
		},
		{
			name: "PermanentError", s: settings,
			op:       func(context.Context, int, func()) error { return fmt.Errorf("400 bad request: %w", ErrPermanent) },
			expected: "a call that returns the permanent error of its first attempt",
			reached: func(_ *inFlightSpy, c counts, res result) bool {
				return c.n == 1 && errors.Is(res.err, ErrPermanent)
			},
		},
		{
			name: "Denied", s: settings, deny: true, op: transient,
			expected: "a retry the budget denies, after a first attempt that failed with a transient error",
			reached: func(sp *inFlightSpy, c counts, _ result) bool {
				_, d := sp.retries()
				return d >= 1 && c.n >= 1
			},
		},
		{
			name: "OutOfAttempts", s: settings, op: transient,
			expected: "a call that used all of MaxAttempts 3, every retry granted, and failed",
			reached: func(sp *inFlightSpy, c counts, res result) bool {
				g, _ := sp.retries()
				return c.n == settings.MaxAttempts && g >= settings.MaxAttempts-1 && res.err != nil
			},
		},
		{
			name: "CancelDuringAttempt", s: settings,
			op: func(_ context.Context, _ int, cancel func()) error {
				cancel() // the caller gives up while the attempt runs
				return ErrTransient
			},
			expected: "a call whose caller cancels during its first attempt, which then fails",
			reached:  func(_ *inFlightSpy, c counts, _ result) bool { return c.n >= 1 },
		},
		{
			name: "CancelDuringBackoff", s: Settings{MaxAttempts: 3, BaseDelay: time.Hour, MaxDelay: 2 * time.Hour},
			op:       func(context.Context, int, func()) error { return &RetryAfterError{Delay: time.Hour} },
			inWait:   true,
			expected: "a retry granted, and the caller's cancel while the loop waits to make it, 1ms into a call whose first attempt failed at once with a server delay of 1h",
		},
		{
			// A loop that hedges starts another attempt beside the slow
			// first, which loses; one that does not retries after it.
			name: "LaterAttemptWins", s: settings,
			op: func(_ context.Context, n int, _ func()) error {
				if n == 1 {
					sched.Hook.Sleep(time.Second) // ignores ctx
					return ErrTransient
				}
				return nil
			},
			expected: "a call that succeeds on a later attempt, after a first attempt that takes 1s (ignoring ctx) and fails",
			reached:  func(_ *inFlightSpy, c counts, res result) bool { return c.n >= 2 && res.err == nil },
		},
	}
}

// An endsRun is one call of EveryStartEnds down one path.
type endsRun struct {
	path  endsPath
	sched string // under which controlled schedule, if any
	log   []endsEvent
	saw   string // what happened instead of the premise; "" when it was reached
}

// runPath makes one call of l down p, under ctl if set (the k-th schedule),
// inside the caller's bubble, and returns it; false when the controlled
// run fell back to free running and the call judges nothing.
func runPath(t *testing.T, l Loop, p endsPath, ctl *sched.Options, k int) (endsRun, bool) {
	run := endsRun{path: p}
	if ctl != nil {
		run.sched = fmt.Sprintf(", under control, schedule %d of %d (%v; %s replays it)", k+1, control.Schedules(), *ctl, control.Describe())
	}
	sp := &inFlightSpy{deny: p.deny}
	told := l
	told.Call = func(ctx context.Context, b budget.Budget, s Settings, op func(context.Context) error) error {
		err := l.Call(ctx, b, s, op)
		sp.mark(endsEvent{op: evReturned, err: err})
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelled := func() {
		sp.mark(endsEvent{op: evCancel})
		cancel()
	}
	r := newRecorder(t, told, func(ctx context.Context, n int) error {
		sp.mark(endsEvent{op: evBegin, n: n})
		err := p.op(ctx, n, cancelled)
		sp.mark(endsEvent{op: evFinish, n: n, err: err})
		return err
	})
	r.ctl = ctl
	defer r.drain()
	defer explainRun(t, k, r)
	done := r.start(ctx, sp, p.s)
	var res result
	returned := false
	if p.inWait {
		time.Sleep(time.Millisecond) // the first attempt has failed; the loop waits
		synctest.Wait()
		c := r.counts()
		granted, _ := sp.retries()
		select {
		case res = <-done:
			returned = true
			run.saw = fmt.Sprintf("%s had returned, after %d attempts, with %v", l.Name, c.n, res.err)
		default:
			switch {
			case c.n == 0 || c.running > 0:
				run.saw = fmt.Sprintf("%s had made %d attempts, and %d still ran", l.Name, c.n, c.running)
			case granted == 0:
				run.saw = fmt.Sprintf("%s was waiting after %d attempts, with no retry granted: it had not asked the budget", l.Name, c.n)
			}
			cancelled()
		}
	}
	if !returned {
		var ok bool
		if res, ok = r.within(t, done, callLimit, k); !ok {
			return run, true // t has failed
		}
	}
	if fellBackRun(t, k, r) {
		return run, false
	}
	if r.spinning() {
		return run, true // t has failed
	}
	// Whatever the loop left running ends, and tells the budget what it
	// tells it, before the log is read.
	synctest.Wait()
	r.drain()
	synctest.Wait()
	run.log = sp.events()
	c := r.counts()
	if !p.inWait && !p.reached(sp, c, res) {
		run.saw = fmt.Sprintf("%s made %d attempts and returned %v; the budget saw: %s", l.Name, c.n, res.err, joinEvents(run.log))
	}
	if c.peak > 1 && k == 0 {
		t.Logf("%s, %s: ran up to %d attempts at once", l.Name, p.name, c.peak)
	}
	return run, true
}

func checkEveryStartEnds(t *testing.T, l Loop) {
	var runs []endsRun
	for _, p := range endsPaths() {
		for k, ctl := range schedules(l.Name + "/EveryStartEnds/" + p.name) {
			var run endsRun
			judged := true
			synctest.Test(t, func(t *testing.T) { run, judged = runPath(t, l, p, ctl, k) })
			if !judged {
				synctest.Test(t, func(t *testing.T) { run, _ = runPath(t, l, p, nil, k) })
			}
			runs = append(runs, run)
		}
	}
	// A bubble that failed (a spin, a call that never returned) has
	// stopped the check already; every run here has its log.
	var reached []endsRun
	unmetPaths := map[string]bool{}
	for _, run := range runs {
		if run.saw == "" {
			reached = append(reached, run)
		} else if !unmetPaths[run.path.name] {
			unmetPaths[run.path.name] = true
			unmet(t, fmt.Sprintf("on the path %s, %s", run.path.name, run.path.expected), run.saw+run.sched)
		}
	}
	if len(reached) == 0 {
		return
	}
	ends := 0
	for _, run := range reached {
		for _, e := range run.log {
			if e.op == evAttemptEnd || e.op == evCallEnd {
				ends++
			}
		}
	}
	if ends == 0 {
		var paths []string
		for _, run := range reached {
			paths = append(paths, run.path.name)
		}
		t.Errorf("%s does not tell in-flight budgets when attempts and calls end: handed a budget.InFlightBudget, it called neither AttemptEnd nor CallEnd on any path (%s), so such a budget counts every attempt and call in flight for ever and leaks a permit on every call (a loop that does not support in-flight budgets may Skip EveryStartEnds, with that reason); on the path %s the budget saw: %s",
			l.Name, strings.Join(paths, ", "), reached[0].path.name, joinEvents(reached[0].log))
		return
	}
	failed := map[string]bool{}
	for _, run := range reached {
		if failed[run.path.name] {
			continue
		}
		if problems := endsProblems(run.log); len(problems) > 0 {
			failed[run.path.name] = true
			t.Errorf("%s, on the path %s (%s)%s: %s\n\tthe budget saw: %s", l.Name, run.path.name, run.path.expected, run.sched, strings.Join(problems, "; "), joinEvents(run.log))
		}
	}
}

package harness

import (
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/model"
)

// A Cause is what went wrong in a piece of a check, other than a wrong
// answer.
type Cause int

// The causes, each with a rule of its own in budgettest.
const (
	FactoryPanicked Cause = iota + 1 // the factory panicked
	FactoryExited                    // the factory called t.FailNow (t.Fatal) or runtime.Goexit
	FactoryNil                       // the factory returned a nil budget
	MethodPanicked                   // a method of the budget panicked
	Stuck                            // a call did not return within the watchdog's limit
	Leaked                           // a goroutine the budget started outlived its bubble
	Panicked                         // something else panicked: a model, or the harness itself
)

func (c Cause) String() string {
	switch c {
	case FactoryPanicked:
		return "the factory panicked"
	case FactoryExited:
		return "the factory called t.FailNow"
	case FactoryNil:
		return "the factory returned a nil budget"
	case MethodPanicked:
		return "a budget method panicked"
	case Stuck:
		return "a call never returned"
	case Leaked:
		return "a goroutine leaked"
	case Panicked:
		return "a panic"
	}
	return fmt.Sprintf("Cause(%d)", int(c))
}

// A Fault is a failure of a piece of a check that is not a wrong answer:
// what happened, during what, and where.
type Fault struct {
	Cause  Cause
	During string   // the piece of the check that was running
	Method string   // for MethodPanicked: "Request", "Retry", "Success" or "Close"
	Op     model.Op // for MethodPanicked: the operation being applied
	Value  any      // the panic's value, for the panics
	Stack  string   // the panicking goroutine's stack, or every goroutine's when Stuck
}

func (f *Fault) Error() string {
	var b strings.Builder
	switch f.Cause {
	case MethodPanicked:
		fmt.Fprintf(&b, "the budget's %s panicked", f.Method)
		if f.Method != "Close" {
			fmt.Fprintf(&b, " on %v", f.Op)
		}
		fmt.Fprintf(&b, ": %v", f.Value)
	case FactoryPanicked, Panicked:
		fmt.Fprintf(&b, "%s: %v", f.Cause, f.Value)
	case Leaked:
		fmt.Fprintf(&b, "%s: %v", f.Cause, f.Value)
	default:
		b.WriteString(f.Cause.String())
		if f.Value != nil {
			fmt.Fprintf(&b, ": %v", f.Value)
		}
	}
	if f.During != "" {
		fmt.Fprintf(&b, " (during %s)", f.During)
	}
	switch {
	case f.Stack == "":
	case f.Cause == Stuck:
		// The summary again after the stacks: a CI log cut to its tail
		// still says what stopped.
		head := b.String()
		fmt.Fprintf(&b, "\nthe goroutines inside the budget:\n%s\n(the goroutines above: %s)", stuckIn(f.Stack), head)
	default:
		if site := panicSite(f.Stack); site != "" {
			fmt.Fprintf(&b, "\npanicked at %s", site)
		}
	}
	return b.String()
}

// panicSite returns the function and line that panicked, from a stack
// read while the panic ran: the frame after the first "panic(" frame.
func panicSite(stack string) string {
	lines := strings.Split(stack, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic(") && i+3 < len(lines) {
			fn := lines[i+2]
			if j := strings.LastIndex(fn, "("); j > 0 {
				fn = fn[:j]
			}
			at := strings.TrimSpace(lines[i+3])
			if j := strings.LastIndex(at, " +0x"); j > 0 {
				at = at[:j]
			}
			return fn + " (" + filepath.Base(at) + ")"
		}
	}
	return ""
}

// stuckIn returns the stacks, 30 lines at most each, of the goroutines of
// a dump that are inside a call of the budget, or the first 40 lines of the
// dump if none is.
func stuckIn(dump string) string {
	var out []string
	for _, g := range strings.Split(dump, "\n\n") {
		if strings.Contains(g, "harness.Perform") || strings.Contains(g, "harness.Subject[...].Open") {
			out = append(out, firstLines(g, 30))
		}
		if len(out) == 2 {
			break
		}
	}
	if len(out) == 0 {
		return firstLines(dump, 40)
	}
	return strings.Join(out, "\n\n")
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append(lines[:n], "\t...")
	}
	return strings.Join(lines, "\n")
}

// asFault turns a recovered panic value into a Fault: a Fault raised below
// (by Perform or a factory) keeps its cause, testing/synctest's report of
// a goroutine left blocked in its bubble is a Leaked and its report of a
// bubble where every goroutine is blocked a Stuck, and anything else is a
// Panicked.
func asFault(during string, p any) *Fault {
	if f, ok := p.(*Fault); ok {
		if f.During == "" {
			f.During = during
		}
		return f
	}
	// testing/synctest's reports are a string once and an error of the
	// runtime's now: read either.
	var msg string
	switch v := p.(type) {
	case string:
		msg = v
	case error:
		msg = v.Error()
	}
	switch {
	case strings.HasPrefix(msg, "deadlock: main bubble goroutine has exited but blocked goroutines remain"):
		return &Fault{Cause: Leaked, During: during, Value: "a goroutine the budget started is still blocked when the check ends: a budget that owns goroutines must stop them in Close() error"}
	case strings.HasPrefix(msg, "deadlock: all goroutines in bubble are blocked"):
		return &Fault{Cause: Stuck, During: during, Value: "every goroutine of the check's testing/synctest bubble is blocked: a call that can never return (a deadlock)", Stack: allStacks()}
	}
	return &Fault{Cause: Panicked, During: during, Value: p, Stack: string(debug.Stack())}
}

// Catch runs f and returns a panic in it as a *Fault, or nil. Every
// goroutine a check starts runs its work under Catch, so that no panic can
// take the test binary down.
func Catch(during string, f func()) (err error) {
	done := false
	defer func() {
		if done {
			return
		}
		if p := recover(); p != nil {
			err = asFault(during, p) // the panicking stack is still there to read
		}
	}()
	f()
	done = true
	return nil
}

// DefaultWatchdog is the limit Guard applies when given none.
const DefaultWatchdog = 60 * time.Second

// returned counts the calls of a budget that have returned (or panicked)
// through Perform, in this process: what tells a check that is slow, its
// budget doing much work a call, from one whose calls have stopped
// returning.
var returned atomic.Uint64

// Progress returns how many budget calls made through Perform have
// returned so far, in this process.
func Progress() uint64 { return returned.Load() }

// busy counts the bounded computations of the suite's own (a search for a
// linearization) under way in this process.
var busy atomic.Int64

// Busy runs f, a computation of the suite's own that is bounded by its own
// timeout (the search for an order of a history, on a loaded machine under
// -race, may take minutes): while it runs, Guard counts the time as
// progress, since no call of the budget is waited for.
func Busy(f func()) {
	busy.Add(1)
	defer busy.Add(-1)
	f()
}

// Guard runs f on a goroutine of its own under Catch, and returns its error,
// or a Stuck Fault with every goroutine's stack if f has gone limit (zero
// means DefaultWatchdog) without a budget call returning (see Progress)
// and outside any computation Busy runs:
// a finite computation, however slow, is not stuck, while a call that
// never returns stops every run that waits for it. A stuck goroutine is
// left behind: nothing can stop it.
func Guard(during string, limit time.Duration, f func() error) error {
	if limit <= 0 {
		limit = DefaultWatchdog
	}
	done := make(chan error, 1)
	go func() {
		sent := false
		defer func() {
			// A runtime.Goexit ends this goroutine whatever it defers;
			// say so instead of leaving the watchdog to fire.
			if !sent {
				done <- &Fault{Cause: Panicked, During: during, Value: "runtime.Goexit was called (t.Fatal or t.FailNow on a goroutine of the check)"}
			}
		}()
		var err error
		if p := Catch(during, func() { err = f() }); p != nil {
			err = p
		}
		sent = true
		done <- err
	}()
	tick := max(limit/8, time.Millisecond)
	timer := time.NewTicker(tick)
	defer timer.Stop()
	w := newWatchdog(limit, tick, Progress(), time.Now())
	for {
		select {
		case err := <-done:
			return err
		case <-timer.C:
			if w.stuck(time.Now(), Progress(), busy.Load() > 0) {
				return &Fault{Cause: Stuck, During: fmt.Sprintf("%s, no call of the budget returned for %v", during, limit), Stack: allStacks()}
			}
		}
	}
}

// A watchdog decides, tick by tick, whether a run has gone its limit
// without progress. Time the process did not run does not count: a tick
// that comes more than two ticks after the one before means the whole
// process was held up (a paused virtual machine, a container out of its
// CPU quota, a machine swapping), and the budget's calls, held up with
// it, could not have returned either. At most two ticks of such a gap
// count; a budget that is really stuck leaves the process idle, and its
// ticks come on time.
type watchdog struct {
	limit, tick time.Duration
	seen        uint64    // Progress at the last tick
	last        time.Time // the last tick
	quiet       time.Duration
}

func newWatchdog(limit, tick time.Duration, progress uint64, now time.Time) *watchdog {
	return &watchdog{limit: limit, tick: tick, seen: progress, last: now}
}

// stuck takes a tick at now, with the process's Progress and whether a
// computation of the suite's own is under way, and reports whether the
// limit has passed without progress.
func (w *watchdog) stuck(now time.Time, progress uint64, busy bool) bool {
	gap := min(now.Sub(w.last), 2*w.tick)
	w.last = now
	if progress != w.seen || busy {
		w.seen, w.quiet = progress, 0
		return false
	}
	w.quiet += gap
	return w.quiet >= w.limit
}

// allStacks returns the stacks of every goroutine, up to 64 KiB of them.
func allStacks() string {
	buf := make([]byte, 64<<10)
	return string(buf[:runtime.Stack(buf, true)])
}

package stress

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/control"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/procs"
	"github.com/retrybudget/retrybudget/yield"
)

// childEnv tells a child process which test, loop and check it runs, as
// "TestName|LoopName|CheckName".
const childEnv = "RETRYBUDGET_LOOPCHECK_CHILD"

// An Outcome is the result of one loop check run in a child process.
type Outcome struct {
	Result  string        // "pass", "fail", "skip", or "crash" when the child died before the check finished
	Output  string        // what the check printed, and what the child printed after it; all of the child's output, for a crash
	Elapsed time.Duration // the child's run, start to exit
}

// IsolatedLoopChecks runs each loop check on l in a child process of its
// own: the test binary runs again, only the calling test, with an
// environment variable that names the loop and the check. In the child, the
// same call runs that check and returns nil; in the parent it returns each
// check's outcome, and fails nothing: the caller decides. A loop that
// leaks, panics or hangs (up to timeout per check; zero means 2 minutes)
// shows as a failed or crashed check instead of taking the test binary
// down, and cannot spoil the checks after it. A child that hangs past its
// timeout prints every goroutine's stack (its own -test.timeout, or the
// parent's SIGQUIT a little later), and the outcome keeps all of it.
//
// The checks whose cases run goroutines of their own, when they passed,
// run again in the instrumented test binary that package budgettest
// builds for its controlled stages (internal/control), under controlled
// schedules; their outcomes are then those runs'. Where that binary cannot
// be had, their outcome says in one line that the verdict is uncontrolled.
//
// Names in only restrict the run to those checks (none means every one);
// a name that is not a check's fails the test. The calling test must make
// the same IsolatedLoopChecks (or budgettest.RunLoop) calls in the child as
// in the parent. A key of l.Skip that names no check fails the test, in the
// parent and in the child.
func IsolatedLoopChecks(t *testing.T, l Loop, timeout time.Duration, only ...string) map[string]Outcome {
	t.Helper()
	for _, n := range only {
		if !slices.Contains(checkNames(), n) {
			t.Fatalf("stress: no loop check %q; the checks are %s", n, strings.Join(checkNames(), ", "))
		}
	}
	return isolate(t, l, only, timeout, 0)
}

// killGrace is how long after a child's own -test.timeout the parent stops
// waiting and signals it.
const killGrace = 10 * time.Second

// isolate is IsolatedLoopChecks for the checks named in only (every check
// when only is nil). killAfter, if positive, is when the parent signals
// the child, whatever the child's own timeout; zero means timeout plus
// killGrace.
func isolate(t *testing.T, l Loop, only []string, timeout, killAfter time.Duration) map[string]Outcome {
	t.Helper()
	if err := validateSkip(l); err != nil {
		t.Fatal(err)
	}
	checks := LoopChecks()
	if only != nil {
		checks = slices.DeleteFunc(checks, func(c LoopCheck) bool { return !slices.Contains(only, c.Name) })
	}
	if v := os.Getenv(childEnv); v != "" {
		for _, c := range checks {
			if v == t.Name()+"|"+l.Name+"|"+c.Name {
				runCheck(t, l, c)
			}
		}
		return nil
	}
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	if killAfter <= 0 {
		killAfter = timeout + killGrace
	}
	outcomes := map[string]Outcome{}
	eachAtOnce(checks, func(c LoopCheck) Outcome {
		return spawnCheck(t, os.Args[0], l, c, timeout, killAfter)
	}, outcomes)
	controlledStage(t, l, checks, outcomes, timeout, killAfter)
	return outcomes
}

// eachAtOnce runs spawn for every check, as many at once as the machine
// has processors (at least two), and puts each outcome into outcomes under
// the check's name. A child spends much of its time waiting (for a leak
// to end, for a call's watchdog) on one processor at most: one child
// after another, the kill matrix's loop rows took 40 s under -race with
// a processor idle.
func eachAtOnce(checks []LoopCheck, spawn func(LoopCheck) Outcome, outcomes map[string]Outcome) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, max(2, procs.Base()))
	for _, c := range checks {
		wg.Go(func() {
			slots <- struct{}{}
			o := spawn(c)
			<-slots
			mu.Lock()
			outcomes[c.Name] = o
			mu.Unlock()
		})
	}
	wg.Wait()
}

// controlledStage runs again, in the instrumented child binary (see
// package internal/control), each check of checks that explores schedules
// and passed freely, when this binary is not instrumented itself; a
// check's controlled outcome replaces its free one. Where no instrumented
// binary can be had, each such outcome says in one line that its verdict
// is uncontrolled.
func controlledStage(t *testing.T, l Loop, checks []LoopCheck, outcomes map[string]Outcome, timeout, killAfter time.Duration) {
	if yield.Instrumented() || control.Schedules() == 0 {
		return
	}
	var todo []LoopCheck
	for _, c := range checks {
		if _, skipped := l.Skip[c.Name]; slices.Contains(scheduledChecks, c.Name) && !skipped && outcomes[c.Name].Result == "pass" {
			todo = append(todo, c)
		}
	}
	if len(todo) == 0 {
		return
	}
	why := ""
	mode, err := control.CurrentMode()
	switch {
	case err != nil:
		why = err.Error()
	case mode == control.Off:
		why = "-budgettest.control=off"
	}
	var child *control.Child
	if why == "" {
		var pkgs []string
		if p := funcPackage(l.Call); p != "" {
			pkgs = append(pkgs, p)
		}
		if child, err = control.Binary(pkgs); err != nil {
			why = err.Error()
			var u *control.Uncontrolled
			if errors.As(err, &u) {
				why = u.Why
			}
		} else if child.Built {
			t.Logf("stress: built the instrumented test binary in %v (%d yield points in %s); later runs of unchanged sources reuse it",
				child.Took.Round(time.Millisecond), child.Points, strings.Join(child.Packages, " "))
		}
	}
	if why != "" {
		for _, c := range todo {
			line := fmt.Sprintf("stress: %s: uncontrolled verdict (free runs only): %s", c.Name, why)
			o := outcomes[c.Name]
			if mode == control.Require {
				o.Result = "fail"
				line += "; -budgettest.control=require asks for a controlled verdict"
			}
			o.Output += line + "\n"
			outcomes[c.Name] = o
		}
		return
	}
	controlled := map[string]Outcome{}
	eachAtOnce(todo, func(c LoopCheck) Outcome {
		return spawnCheck(t, child.Path, l, c, timeout, killAfter, controlledStageEnv+"=1")
	}, controlled)
	for name, o := range controlled {
		o.Output = "under control (an instrumented child, " + control.Describe() + "):\n" + o.Output
		o.Elapsed += outcomes[name].Elapsed // the free run's
		outcomes[name] = o
	}
}

// funcPackage returns the import path of the package that declares the
// function f, or "".
func funcPackage(f any) string {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Func || v.IsNil() {
		return ""
	}
	fn := runtime.FuncForPC(v.Pointer())
	if fn == nil {
		return ""
	}
	name := fn.Name() // path/to/pkg.Func.func1, path/to/pkg.(*T).M
	slash := strings.LastIndex(name, "/")
	dot := strings.Index(name[slash+1:], ".")
	if dot < 0 {
		return ""
	}
	return strings.TrimSuffix(name[:slash+1+dot], "_test")
}

// spawnCheck runs check c on l in a child process of the binary bin and
// returns its outcome.
func spawnCheck(t *testing.T, bin string, l Loop, c LoopCheck, timeout, killAfter time.Duration, env ...string) Outcome {
	ctx, cancel := context.WithTimeout(context.Background(), killAfter)
	defer cancel()
	args := append([]string{"-test.run=" + runPattern(t.Name()), "-test.v", "-test.count=1", "-test.timeout=" + timeout.String()}, childFlags()...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(append(harness.ChildEnv(), childEnv+"="+t.Name()+"|"+l.Name+"|"+c.Name), env...)
	cmd.Cancel = func() error {
		// SIGQUIT: the Go runtime prints every goroutine's stack,
		// then exits. Where there is no such signal, kill.
		if err := cmd.Process.Signal(syscall.SIGQUIT); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
	cmd.WaitDelay = killGrace // then kill, if SIGQUIT did not end it
	start := time.Now()
	out, _ := cmd.CombinedOutput()
	killed := ctx.Err() != nil
	exit := -1
	if cmd.ProcessState != nil {
		exit = cmd.ProcessState.ExitCode()
	}
	o := parseOutcome(string(out), t.Name(), c.Name, exit)
	o.Elapsed = time.Since(start)
	if killed {
		o.Result = "crash"
		o.Output = fmt.Sprintf("the parent signalled the child after %v:\n%s", killAfter, o.Output)
	}
	return o
}

// runCheck runs one check as a subtest of t.
func runCheck(t *testing.T, l Loop, c LoopCheck) {
	t.Run(c.Name, func(t *testing.T) {
		if why, ok := l.Skip[c.Name]; ok {
			t.Skipf("%s: %s", l.Name, why)
		}
		c.Run(t, guarded(t, l, c.Name))
	})
}

// guarded returns l with its Call made to report a panic of the loop as a
// failure of check on t, naming the loop, the settings it was given and
// the panic, instead of crashing the child process (where it read as "the
// child process died"). The call's goroutine then ends, as when the spin
// guard stops a call, so the check judges nothing more of it. A library
// that panics on settings it refuses (a zero delay, say) gets the Skip to
// use when the check's premise needs them.
func guarded(t *testing.T, l Loop, check string) Loop {
	inner := l.Call
	l.Call = func(ctx context.Context, b budget.Budget, s Settings, op func(context.Context) error) error {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("the loop %s panicked in %s, given Settings %+v: %v\n%s\nif the loop cannot take the settings this check needs, skip it with the reason: Loop.Skip[%q] = \"...\"",
					l.Name, check, s, p, debug.Stack(), check)
				runtime.Goexit()
			}
		}()
		return inner(ctx, b, s, op)
	}
	return l
}

// runPattern returns a -test.run pattern that selects exactly the test
// named name, subtests included.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

var (
	resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(`)
	eventLine  = regexp.MustCompile(`^\s*=== (RUN|NAME|CONT|PAUSE)\s+(\S+)`)
)

// parseOutcome reads the -test.v output of a child that ran one check under
// the test named parent and exited with status exit (-1 for a signal). The
// outcome keeps what the check printed, and anything the child printed
// after the check's result line other than the ends of its parent tests;
// a child that died after the check finished is a crash. A child that died
// before gives a crash with all of its output.
func parseOutcome(out, parent, check string, exit int) Outcome {
	name := parent + "/" + check
	var log strings.Builder
	in := false
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		if m := eventLine.FindStringSubmatch(line); m != nil {
			in = m[2] == name || strings.HasPrefix(m[2], name+"/")
			continue
		}
		if m := resultLine.FindStringSubmatch(line); m != nil && m[2] == name {
			o := Outcome{Result: strings.ToLower(m[1]), Output: log.String()}
			if after := trailer(lines[i+1:], name); after != "" {
				o.Output += "after the check's result, the child printed:\n" + after
			}
			if exit != 0 && exit != 1 {
				o.Result = "crash"
				o.Output += fmt.Sprintf("the child died after the check finished (exit status %d)\n", exit)
			}
			return o
		}
		if in {
			log.WriteString(line + "\n")
		}
	}
	return Outcome{Result: "crash", Output: out}
}

// trailer returns lines, the output after the result line of the check
// named name, without what every child prints there: the results and
// events of the tests that enclose it and of its own subtests (whose
// results follow its own), PASS or FAIL, and blank lines.
func trailer(lines []string, name string) string {
	var b strings.Builder
	for _, line := range lines {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || trimmed == "PASS" || trimmed == "FAIL" {
			continue
		}
		m := resultLine.FindStringSubmatch(line)
		if m == nil {
			m = eventLine.FindStringSubmatch(line)
		}
		if m != nil && (strings.HasPrefix(name, m[2]+"/") || m[2] == name || strings.HasPrefix(m[2], name+"/")) {
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

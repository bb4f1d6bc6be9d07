package stress

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
)

// A loop that retries with no wait, whatever it is told, makes every
// bubble check fail within moments, "N attempts at one instant", instead of
// hanging the child until it is killed (2 minutes, before the spin guard).
func TestSpinningLoopReportedAtOnce(t *testing.T) {
	t.Parallel()
	spin := Loop{Name: "Spins", Call: func(ctx context.Context, _ budget.Budget, _ Settings, op func(context.Context) error) error {
		for {
			op(ctx) // ignores ctx and every error
		}
	}}
	var bubbled []string // the checks in bubbles: all but the one in real time
	for _, c := range LoopChecks() {
		if c.Name != "NoGoroutineOutlivesCall" {
			bubbled = append(bubbled, c.Name)
		}
	}
	outcomes := isolate(t, spin, bubbled, time.Minute, 0)
	if outcomes == nil {
		return
	}
	for _, name := range bubbled {
		o := outcomes[name]
		if o.Result != "fail" || !strings.Contains(o.Output, "attempts at one instant") {
			t.Errorf("%s on a loop that spins: %s after %v, want a failure that says \"attempts at one instant\":\n%s", name, o.Result, o.Elapsed, o.Output)
		}
		if o.Elapsed > 20*time.Second {
			t.Errorf("%s took %v to report a loop that spins; want moments", name, o.Elapsed)
		}
	}
}

// hung blocks on a channel that no one closes; a bubble cannot tell it from
// a wait, so only a timeout ends it.
var hung = make(chan struct{})

func hangingGoroutine() { <-hung }

// hangs starts 200 goroutines that hang, and hangs: the stack dump of its
// child is far longer than the 4000 characters that used to be kept.
var hangs = Loop{Name: "Hangs", Call: func(context.Context, budget.Budget, Settings, func(context.Context) error) error {
	for range 200 {
		go hangingGoroutine()
	}
	hangingGoroutine()
	return nil
}}

// wholeDump checks that a hung child's outcome keeps its whole stack dump.
func wholeDump(t *testing.T, o Outcome, want string) {
	t.Helper()
	if o.Result != "crash" || !strings.Contains(o.Output, want) {
		t.Errorf("a loop that hangs: %s, want a crash with %q:\n%s", o.Result, want, o.Output)
	}
	if n := strings.Count(o.Output, "stress.hangingGoroutine("); n < 200 {
		t.Errorf("the outcome shows %d of the 201 hanging goroutines, in %d characters: the stack dump is cut", n, len(o.Output))
	}
	if !strings.Contains(o.Output, "=== RUN") {
		t.Errorf("the outcome lost the start of the child's output:\n%.2000s", o.Output)
	}
}

// A child that hangs past its timeout prints every goroutine's stack
// (testing's own timeout), and the outcome keeps all of it.
func TestHungChildKeepsWholeStackDump(t *testing.T) {
	t.Parallel()
	outcomes := isolate(t, hangs, []string{"NoAttemptOnDoneContext"}, 3*time.Second, 0)
	if outcomes == nil {
		return
	}
	wholeDump(t, outcomes["NoAttemptOnDoneContext"], "panic: test timed out")
}

// When the parent has to stop the child itself, it sends SIGQUIT, and the
// outcome keeps the stack dump the Go runtime prints.
func TestKilledChildKeepsWholeStackDump(t *testing.T) {
	t.Parallel()
	outcomes := isolate(t, hangs, []string{"NoAttemptOnDoneContext"}, time.Hour, 3*time.Second)
	if outcomes == nil {
		return
	}
	o := outcomes["NoAttemptOnDoneContext"]
	wholeDump(t, o, "SIGQUIT")
	if !strings.Contains(o.Output, "the parent signalled the child") {
		t.Errorf("the outcome does not say that the parent stopped the child:\n%.2000s", o.Output)
	}
}

// What the child prints after the check's result line is kept, and a child
// that dies after its check passed is a crash, not a pass.
func TestOutputAfterResultKept(t *testing.T) {
	t.Parallel()
	l := RetrierLoop()
	outcomes := isolate(t, l, []string{"NoAttemptOnDoneContext"}, time.Minute, 0)
	if outcomes == nil {
		if os.Getenv(childEnv) != "" {
			fmt.Println("words printed after the check")
			panic("a panic after the check")
		}
		return
	}
	o := outcomes["NoAttemptOnDoneContext"]
	for _, want := range []string{"after the check's result, the child printed:", "words printed after the check", "panic: a panic after the check"} {
		if !strings.Contains(o.Output, want) {
			t.Errorf("the outcome lost %q:\n%s", want, o.Output)
		}
	}
	if o.Result != "crash" {
		t.Errorf("a child that panicked after its check passed: %s, want crash", o.Result)
	}
}

// probeEnv names the test a child runs as a probe of what a test reports.
const probeEnv = "RETRYBUDGET_LOOPCHECK_PROBE"

// A Skip key that names no check fails IsolatedLoopChecks, with the key
// and the names of the checks.
func TestUnknownSkipKeyFails(t *testing.T) {
	t.Parallel()
	typo := Loop{Name: "Typo", Call: RetrierLoop().Call, Skip: map[string]string{"MaxElapsed": "no elapsed limit"}}
	if os.Getenv(probeEnv) == "unknown Skip key" {
		IsolatedLoopChecks(t, typo, 0)
		t.Log("not stopped")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(harness.ChildEnv(), probeEnv+"=unknown Skip key")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Errorf("IsolatedLoopChecks with an unknown Skip key passed:\n%s", out)
	}
	for _, want := range append([]string{`skips unknown check "MaxElapsed"`}, checkNames()...) {
		if !strings.Contains(string(out), want) {
			t.Errorf("IsolatedLoopChecks with an unknown Skip key: the failure does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "not stopped") || strings.Contains(string(out), "=== RUN   "+t.Name()+"/") {
		t.Errorf("IsolatedLoopChecks went on after the unknown Skip key:\n%s", out)
	}
	if err := validateSkip(RetrierLoop()); err != nil {
		t.Errorf("validateSkip(RetrierLoop()) = %v, want nil", err)
	}
	if err := validateSkip(Loop{Name: "ok", Call: RetrierLoop().Call, Skip: map[string]string{"MaxElapsedEndsTheLoop": "none"}}); err != nil {
		t.Errorf("validateSkip of a known key = %v, want nil", err)
	}
}

// A Loop with a nil Call fails IsolatedLoopChecks once, naming the loop
// and the field, before any child process starts: no check runs, and
// nothing crashes.
func TestNilCallFailsOnce(t *testing.T) {
	t.Parallel()
	if os.Getenv(probeEnv) == "nil Call" {
		IsolatedLoopChecks(t, Loop{Name: "NoCall"}, 0)
		t.Log("not stopped")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(harness.ChildEnv(), probeEnv+"=nil Call")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("IsolatedLoopChecks with a nil Call passed:\n%s", out)
	}
	if !strings.Contains(string(out), `loop "NoCall" has a nil Call`) {
		t.Errorf("the failure does not name the loop and its nil Call:\n%s", out)
	}
	for _, bad := range []string{"not stopped", "SIGSEGV", "nil pointer", "=== RUN   " + t.Name() + "/"} {
		if strings.Contains(string(out), bad) {
			t.Errorf("IsolatedLoopChecks went on after the nil Call (%q):\n%s", bad, out)
		}
	}
}

// IsolatedLoopChecks runs the checks it names, and no other.
func TestIsolatedLoopChecksRunsThoseOnly(t *testing.T) {
	t.Parallel()
	l := RetrierLoop()
	outcomes := IsolatedLoopChecks(t, l, time.Minute, "NoAttemptOnDoneContext", "PermanentNeverRetried")
	if outcomes == nil {
		return // the child
	}
	if len(outcomes) != 2 {
		t.Fatalf("%d outcomes for 2 checks named: %v", len(outcomes), outcomes)
	}
	for _, name := range []string{"NoAttemptOnDoneContext", "PermanentNeverRetried"} {
		if o := outcomes[name]; o.Result != "pass" {
			t.Errorf("%s on the Retrier: %s\n%s", name, o.Result, o.Output)
		}
	}
}

// A loop whose library panics on settings it refuses (here a zero delay)
// fails the checks that give it those settings, saying that the loop
// panicked and which Skip to use, rather than crashing their child
// process.
func TestLoopPanicIsNamed(t *testing.T) {
	t.Parallel()
	l := RetrierLoop()
	inner := l.Call
	l.Name = "ZeroDelayPanics"
	l.Call = func(ctx context.Context, b budget.Budget, s Settings, op func(context.Context) error) error {
		if s.BaseDelay == 0 {
			panic("base must be greater than 0")
		}
		return inner(ctx, b, s, op)
	}
	outcomes := IsolatedLoopChecks(t, l, 2*time.Minute)
	if outcomes == nil {
		return // the child
	}
	panicked := 0
	for name, o := range outcomes {
		if o.Result == "crash" {
			t.Errorf("%s: the child crashed:\n%s", name, o.Output)
		}
		if strings.Contains(o.Output, "base must be greater than 0") {
			panicked++
			if o.Result != "fail" || !strings.Contains(o.Output, "the loop ZeroDelayPanics panicked in "+name) || !strings.Contains(o.Output, `Loop.Skip["`+name+`"]`) {
				t.Errorf("%s: %s, want a failure naming the panic and the Skip:\n%s", name, o.Result, o.Output)
			}
		}
	}
	if panicked == 0 {
		t.Errorf("no check gave the loop a zero delay: %v", outcomes)
	}
}

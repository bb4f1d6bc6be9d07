package stress

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/harness"
)

// childEnv tells a child process which test, loop and check it runs, as
// "TestName|LoopName|CheckName".
const childEnv = "RETRYBUDGET_LOOPCHECK_CHILD"

// An Outcome is the result of one loop check run in a child process.
type Outcome struct {
	Result  string        // "pass", "fail", "skip", or "crash" when the child died before the check finished
	Output  string        // what the check printed (the child's last output, for a crash)
	Elapsed time.Duration // the child's run, start to exit
}

// IsolatedLoopChecks runs each loop check on l in a child process of its
// own: the test binary runs again, only the calling test, with an
// environment variable that names the loop and the check. In the child, the
// same call runs that check and returns nil; in the parent it returns each
// check's outcome, and fails nothing: the caller decides. A loop that
// leaks, panics or hangs (up to timeout per check; zero means 2 minutes)
// shows as a failed or crashed check instead of taking the test binary
// down, and cannot spoil the checks after it.
//
// The calling test must make the same IsolatedLoopChecks (or CheckLoop)
// calls in the child as in the parent.
func IsolatedLoopChecks(t *testing.T, l Loop, timeout time.Duration) map[string]Outcome {
	t.Helper()
	if v := os.Getenv(childEnv); v != "" {
		for _, c := range LoopChecks() {
			if v == t.Name()+"|"+l.Name+"|"+c.Name {
				runCheck(t, l, c)
			}
		}
		return nil
	}
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	outcomes := map[string]Outcome{}
	for _, c := range LoopChecks() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+runPattern(t.Name()), "-test.v", "-test.count=1", "-test.timeout="+timeout.String())
		cmd.Env = append(harness.ChildEnv(), childEnv+"="+t.Name()+"|"+l.Name+"|"+c.Name)
		start := time.Now()
		out, _ := cmd.CombinedOutput()
		cancel()
		o := parseOutcome(string(out), t.Name(), c.Name)
		o.Elapsed = time.Since(start)
		outcomes[c.Name] = o
	}
	return outcomes
}

// runCheck runs one check as a subtest of t.
func runCheck(t *testing.T, l Loop, c LoopCheck) {
	t.Run(c.Name, func(t *testing.T) {
		if why, ok := l.Skip[c.Name]; ok {
			t.Skipf("%s: %s", l.Name, why)
		}
		c.Run(t, l)
	})
}

// CheckLoop runs the loop checks on l in a child process (see
// IsolatedLoopChecks) and reports each as a subtest of t: a broken promise
// fails it, a crash too.
//
// Typical usage inside a test is
//
//	func TestMyRetryLoop(t *testing.T) {
//		stress.CheckLoop(t, stress.Loop{Name: "mine", Call: func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
//			return myretry.Do(ctx, b, s.MaxAttempts, s.BaseDelay, s.MaxDelay, op)
//		}})
//	}
func CheckLoop(t *testing.T, l Loop) {
	t.Helper()
	outcomes := IsolatedLoopChecks(t, l, 0)
	if outcomes == nil {
		return // the child: the checks have run
	}
	for _, c := range LoopChecks() {
		t.Run(c.Name, func(t *testing.T) {
			o := outcomes[c.Name]
			switch o.Result {
			case "pass":
			case "skip":
				t.Skip(strings.TrimSpace(o.Output))
			case "crash":
				t.Errorf("%s: the child process died before this check finished (promise: %s):\n%s", l.Name, c.Rule, o.Output)
			default:
				t.Errorf("%s broke the promise %q:\n%s", l.Name, c.Rule, o.Output)
			}
		})
	}
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

var resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(`)

// parseOutcome reads the -test.v output of a child that ran one check under
// the test named parent.
func parseOutcome(out, parent, check string) Outcome {
	name := parent + "/" + check
	var log strings.Builder
	in := false
	for _, line := range strings.Split(out, "\n") {
		if run, ok := strings.CutPrefix(strings.TrimSpace(line), "=== RUN   "); ok {
			in = run == name || strings.HasPrefix(run, name+"/")
			continue
		}
		if m := resultLine.FindStringSubmatch(line); m != nil && m[2] == name {
			return Outcome{Result: strings.ToLower(m[1]), Output: log.String()}
		}
		if in {
			log.WriteString(line + "\n")
		}
	}
	tail := out
	if len(tail) > 4000 {
		tail = "..." + tail[len(tail)-4000:]
	}
	return Outcome{Result: "crash", Output: tail}
}

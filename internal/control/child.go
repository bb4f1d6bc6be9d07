package control

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/harness"
)

// The environment of a child: which call of the suite it runs the
// controlled stage of, and the file it writes that stage's result to.
const (
	childEnv = "RETRYBUDGET_CONTROL_CHILD"
	outEnv   = "RETRYBUDGET_CONTROL_OUT"
	// priorEnv names a file holding what the calls the test made before
	// the child's call gave back in the parent, for the child to give
	// back the same: a test that goes on only when an earlier call failed
	// (a broken budget's test, say) then reaches the child's call.
	priorEnv = "RETRYBUDGET_CONTROL_PRIOR"
)

var (
	ordMu    sync.Mutex
	ordinals = map[testing.TB]int{}
)

// CallID names a call of the suite within the running test: the test's
// name and how many calls the same test (this run of it: -count runs it
// again) made before it. A child runs the same test once, makes the same
// calls in the same order, and so gives each the same name.
func CallID(t testing.TB) string {
	ordMu.Lock()
	defer ordMu.Unlock()
	n, ok := ordinals[t]
	if !ok {
		t.Cleanup(func() {
			ordMu.Lock()
			defer ordMu.Unlock()
			delete(ordinals, t)
		})
	}
	ordinals[t] = n + 1
	return t.Name() + "#" + strconv.Itoa(n)
}

// InChild reports whether this process is a child that Spawn started.
func InChild() bool { return os.Getenv(childEnv) != "" }

// Mine reports whether this process is the child that runs the controlled
// stage of the call id.
func Mine(id string) bool { return os.Getenv(childEnv) == id }

// WriteResult writes the controlled stage's result, in the child. What
// the test does after the call is the parent's: the caller then ends the
// test (t.Skip), so that its cleanups and TestMain's teardown run as in
// any test process (a server the test started is stopped, its temporary
// directories removed), and the child exits. Should the test not end,
// the child exits exitGrace after the result is written, so that the
// parent never waits on what the test does after the call.
func WriteResult(data []byte) error {
	p := os.Getenv(outEnv)
	if p == "" {
		return fmt.Errorf("budgettest: not a child process (%s unset)", outEnv)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return err
	}
	time.AfterFunc(exitGrace, func() { os.Exit(0) })
	return nil
}

// exitGrace is how long a child whose result is written is given to end
// its test and run the cleanups.
const exitGrace = 10 * time.Second

var (
	priorOnce sync.Once
	prior     map[string]json.RawMessage
)

// Prior returns, in a child, what the call id gave back in the parent, if
// the parent sent it.
func Prior(id string) (json.RawMessage, bool) {
	priorOnce.Do(func() {
		if p := os.Getenv(priorEnv); p != "" {
			if data, err := os.ReadFile(p); err == nil {
				json.Unmarshal(data, &prior)
			}
		}
	})
	v, ok := prior[id]
	return v, ok
}

// A Spawned is what a child left: the result it wrote, or nil if it died
// before writing one, and everything it printed.
type Spawned struct {
	Result  []byte
	Output  string
	Elapsed time.Duration
	Killed  bool // it ran past its time and was signalled
}

// killGrace is how long after its own -test.timeout a child gets before
// the parent signals it.
const killGrace = 10 * time.Second

// Spawn runs the test t in the child binary c with the call id marked as
// the one whose controlled stage runs, and returns what it left. The
// child gets the flags of this family as they are set, every other flag
// set on the command line, and at most timeout (less when t's deadline is
// nearer).
//
// prior maps the names of the calls t made before id (CallID's) to what
// each gave back, for Prior in the child. The flags extra come last, and
// so override the others (-budgettest.replay=file, say).
func Spawn(t *testing.T, c *Child, id string, prior map[string]json.RawMessage, timeout time.Duration, extra ...string) (*Spawned, error) {
	if d, ok := t.Deadline(); ok {
		if left := time.Until(d) - 2*killGrace; left < timeout {
			timeout = max(left, 10*time.Second)
		}
	}
	dir, err := os.MkdirTemp("", "budgettest-child-")
	if err != nil {
		return nil, err
	}
	// The directory outlives the child: the files it saved for a failure
	// are there until the parent's test ends.
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Mkdir(filepath.Join(dir, "artifacts"), 0o755); err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "result.json")
	args := append([]string{"-test.count=1", "-test.timeout=" + timeout.String(),
		"-test.artifacts", "-test.outputdir=" + filepath.Join(dir, "artifacts")}, testArgs(t, extra)...)
	ctx, cancel := context.WithTimeout(context.Background(), timeout+killGrace)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Path, args...)
	cmd.Env = append(childEnvironment(), childEnv+"="+id, outEnv+"="+out)
	if len(prior) > 0 {
		data, err := json.Marshal(prior)
		if err != nil {
			return nil, err
		}
		p := filepath.Join(dir, "prior.json")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return nil, err
		}
		cmd.Env = append(cmd.Env, priorEnv+"="+p)
	}
	cmd.Cancel = func() error {
		// SIGQUIT: the Go runtime prints every goroutine's stack, then
		// exits. Where there is no such signal, kill.
		if err := cmd.Process.Signal(syscall.SIGQUIT); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
	cmd.WaitDelay = killGrace
	start := time.Now()
	output, err := cmd.CombinedOutput()
	if err != nil && cmd.ProcessState == nil {
		return nil, fmt.Errorf("starting the child process %s: %w", c.Path, err) // it never ran
	}
	s := &Spawned{Output: string(output), Elapsed: time.Since(start), Killed: ctx.Err() != nil}
	if data, err := os.ReadFile(out); err == nil {
		s.Result = data
	}
	return s, nil
}

// testArgs are the arguments of a child of t that say what it runs: the
// test, this family's flags and every other flag set, -test.short, and
// extra last.
func testArgs(t *testing.T, extra []string) []string {
	args := append([]string{"-test.run=" + RunPattern(t.Name())}, childFlags()...)
	if testing.Short() {
		args = append(args, "-test.short") // the child makes the runs the parent would
	}
	return append(args, extra...)
}

// OutcomeKey names what Spawn(t, c, id, prior, _, extra...) runs: the
// child (named by its sources, see Binary), the test, the call, the
// flags, the calls before, the environment, and procs, the GOMAXPROCS the
// run scales with. Two spawns with one key run the same code on the same
// input.
func OutcomeKey(t *testing.T, c *Child, id string, prior map[string]json.RawMessage, procs int, extra ...string) (string, error) {
	p, err := json.Marshal(prior) // a map's keys in order
	if err != nil {
		return "", err
	}
	env := slices.DeleteFunc(childEnvironment(), shellBookkeeping)
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			env[i] = "PATH=" + dedupPath(v)
		}
	}
	slices.Sort(env)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%q\n%s\n%q\nprocs=%d\n", filepath.Base(filepath.Dir(c.Path)), id, testArgs(t, extra), p, env, procs)
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// shellBookkeeping reports whether kv is a variable a shell sets for its
// own bookkeeping, which no test reads for what it does: the working
// directory (a test runs in its package's directory whatever PWD says),
// the one before it, the nesting depth, and the last command. They differ
// between go test run from a shell in the package's directory and go test
// run by a program in another (a Cmd with Dir sets PWD, OLDPWD stays what
// it was), and would make another key for the same run.
func shellBookkeeping(kv string) bool {
	name, _, _ := strings.Cut(kv, "=")
	switch name {
	case "PWD", "OLDPWD", "SHLVL", "_":
		return true
	}
	return false
}

// dedupPath returns the list of directories path with each one kept where
// it first appears: the same lookups, whatever the repeats. The go
// command puts its GOROOT/bin first in the PATH of what it runs, once more
// at each level: go test run by a test that go test runs (make routes)
// sees it twice where a shell's go test sees it once.
func dedupPath(path string) string {
	var out []string
	for dir := range strings.SplitSeq(path, string(os.PathListSeparator)) {
		if !slices.Contains(out, dir) {
			out = append(out, dir)
		}
	}
	return strings.Join(out, string(os.PathListSeparator))
}

// outcomeFile is where an outcome saved under key is kept: beside the
// child, so that pruning the child removes it.
func outcomeFile(c *Child, key string) string {
	return filepath.Join(filepath.Dir(c.Path), "outcomes", key+".json")
}

// SavedOutcome returns the result SaveOutcome saved under key, if any.
func SavedOutcome(c *Child, key string) ([]byte, bool) {
	data, err := os.ReadFile(outcomeFile(c, key))
	return data, err == nil
}

// SaveOutcome saves result, what a child run under key wrote, for
// SavedOutcome. The file appears whole or not at all.
func SaveOutcome(c *Child, key string, result []byte) error {
	f := outcomeFile(c, key)
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f), key+".*.tmp")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(result)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), f)
	}
	if werr != nil {
		os.Remove(tmp.Name())
	}
	return werr
}

// childEnvironment is the parent's environment without a child's marks,
// with the race detector (if the parent's variables reach a child built
// with it) not sleeping at exit: see harness.ChildEnv. A child of a race
// parent slept its default second at exit, most of the time of each of
// the Replay check's children under -race.
func childEnvironment() []string {
	var env []string
	for _, kv := range harness.ChildEnv() {
		if strings.HasPrefix(kv, childEnv+"=") || strings.HasPrefix(kv, outEnv+"=") || strings.HasPrefix(kv, priorEnv+"=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// childFlags are the flags of this family as they are now, and every
// other flag set on the command line but go test's own, so that a test
// that reads its own flags makes the same calls in the child.
func childFlags() []string {
	out := Flags()
	flag.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "test.") || strings.HasPrefix(f.Name, "budgettest.") || strings.HasPrefix(f.Name, "stress.") {
			return
		}
		out = append(out, "-"+f.Name+"="+f.Value.String())
	})
	if v := flag.Lookup("budgettest.instrument"); v != nil && v.Value.String() != "" {
		out = append(out, "-budgettest.instrument="+v.Value.String())
	}
	return out
}

// RunPattern returns a -test.run pattern that selects exactly the test
// named name, subtests included.
func RunPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

package budgettest

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/control"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/procs"
	"github.com/retrybudget/retrybudget/internal/race"
	"github.com/retrybudget/retrybudget/internal/stressrun"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/yield"
)

// A call is one call of Run, Verify or VerifyCheck, as the controlled
// stage sees it: the test that made it, the name a child gives the same
// call, and whether this process is that child.
type call struct {
	t     *testing.T
	id    string
	child string // in a child: the check whose controlled stage runs here, "" if none
	skip  bool   // in a child, a call other than the one it runs: do nothing
}

// enter names the call of t and says whether this process runs it: a child
// runs only the call it was started for, and of that only the controlled
// stage of one check.
func enter(t *testing.T) call {
	c := call{t: t, id: control.CallID(t)}
	if !control.InChild() {
		return c
	}
	for _, ck := range Checks() {
		if control.Mine(c.id + "|" + string(ck)) {
			c.child = string(ck)
			return c
		}
	}
	c.skip = true
	return c
}

// A part is one error of what a call gave back, as the parent records it
// for a child: the check that failed (none for a subject turned away) and
// its Failure, or the text of another error.
type part struct {
	Check   string   `json:",omitempty"`
	Failure *Failure `json:",omitempty"`
	Text    string   `json:",omitempty"`
}

var (
	priorMu sync.Mutex
	priors  = map[*testing.T]map[string]json.RawMessage{}
)

// record keeps, in the parent, what the call gave back, for the children
// of later calls of the same test.
func (c call) record(parts []part) {
	data, err := json.Marshal(parts)
	if err != nil {
		return
	}
	priorMu.Lock()
	defer priorMu.Unlock()
	m := priors[c.t]
	if m == nil {
		m = map[string]json.RawMessage{}
		priors[c.t] = m
		c.t.Cleanup(func() {
			priorMu.Lock()
			defer priorMu.Unlock()
			delete(priors, c.t)
		})
	}
	m[c.id] = data
}

// prior returns the calls of the test recorded so far.
func (c call) prior() map[string]json.RawMessage {
	priorMu.Lock()
	defer priorMu.Unlock()
	out := map[string]json.RawMessage{}
	for k, v := range priors[c.t] {
		out[k] = v
	}
	return out
}

// replayed returns, in a child, what this call, one the child does not
// run, gave back in the parent: the same error, rebuilt, so that the test
// goes on as it did there.
func (c call) replayed() error {
	data, ok := control.Prior(c.id)
	if !ok {
		return nil
	}
	var parts []part
	if json.Unmarshal(data, &parts) != nil {
		return nil
	}
	return parts2err(parts)
}

// parts2err builds the error a list of parts stands for: a lone Failure
// with no check as it is (a subject turned away), the others joined, each
// prefixed with its check.
func parts2err(parts []part) error {
	if len(parts) == 1 && parts[0].Check == "" && parts[0].Failure != nil {
		return parts[0].Failure
	}
	var errs []error
	for _, p := range parts {
		var e error = p.Failure
		if p.Failure == nil {
			e = errors.New(p.Text)
		}
		if p.Check != "" {
			e = fmt.Errorf("%s: %w", p.Check, e)
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// hasControlledStage reports whether check c has a controlled stage for
// sub: the Linearizable check always does, the Invariant check for a model
// of the model package's families (its stress runs).
func hasControlledStage[S any](sub Subject[S], c Check) bool {
	switch c {
	case CheckLinearizable:
		return true
	case CheckInvariant:
		_, inflight := sub.Model.(model.InFlightLimit)
		return stressrun.HasInvariant(sub.Model) && !(inflight && harness.IsStructured(sub.Model))
	}
	return false
}

// childOutcome is what a child sends back of one check's controlled stage.
type childOutcome struct {
	Failure *Failure `json:",omitempty"`
	Err     string   `json:",omitempty"` // an error that is not a Failure
	Skip    string   `json:",omitempty"`
	Notes   []string `json:",omitempty"` // for the parent's log
}

// childHeapLimit bounds the heap of a child's controlled stage: past it
// the stage ends with a failure that says so, before the machine's memory
// runs out.
const childHeapLimit = 2 << 30

// watchHeap calls exceeded with a named failure when the heap passes
// limit, checking every 50ms until stop is closed; in a child, exceeded
// sends it and ends the child.
func (sub Subject[S]) watchHeap(c call, limit uint64, stop <-chan struct{}, exceeded func(*Failure)) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 || sample[0].Value.Uint64() <= limit {
			continue
		}
		exceeded(fail(ruleControl, "%s: the controlled stage of %s went past its memory bound: %d MiB of live heap, above %d MiB (a run that never ends, or a history too long to search)",
			sub.name(), c.child, sample[0].Value.Uint64()>>20, limit>>20))
		return
	}
}

var (
	notesMu    sync.Mutex
	childNotes []string
)

// note logs a line of a check's account of itself (how much of the
// exhaustive stage ran): in a child, sent to the parent with the outcome,
// so that plain go test -v prints it; elsewhere, to t's log.
func note(t *testing.T, name, line string) {
	if !control.InChild() {
		t.Helper()
		t.Logf("%s: %s", name, line)
		return
	}
	notesMu.Lock()
	defer notesMu.Unlock()
	childNotes = append(childNotes, line)
}

// sendAndExit sends f as the child's outcome and ends the child at once,
// the check still running, without the test's cleanups.
func sendAndExit(f *Failure) {
	if data, err := json.Marshal(childOutcome{Failure: f}); err == nil && control.WriteResult(data) == nil {
		os.Exit(0)
	}
	os.Exit(2)
}

// runChild runs, in a child, the controlled stage of the check named by c,
// writes its outcome, and ends the test t.
func (sub Subject[S]) runChild(t *testing.T, c call) {
	var o childOutcome
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go sub.watchHeap(c, childHeapLimit, stop, sendAndExit)
	err := sub.run(t, Check(c.child))
	var s skip
	var f *Failure
	switch {
	case errors.As(err, &s):
		o.Skip = string(s)
	case errors.As(err, &f):
		o.Failure = f
	case err != nil:
		o.Err = err.Error()
	}
	notesMu.Lock()
	o.Notes = append(o.Notes, childNotes...)
	notesMu.Unlock()
	if yield.Instrumented() { // a child under -race runs freely (see freeChild)
		o.Notes = append(o.Notes, fmt.Sprintf("controlled stage: %d schedules per scenario or run (%s), %v", control.Schedules(), control.Describe(), time.Since(start).Round(time.Millisecond)))
	}
	data, jerr := json.Marshal(o)
	if jerr == nil {
		jerr = control.WriteResult(data)
	}
	if jerr != nil {
		t.Errorf("budgettest: the controlled stage could not send its outcome: %v", jerr)
		return
	}
	// The rest of the test is the parent's. Ending it here, rather than
	// the process, runs its cleanups: a server it started is stopped.
	t.Skipf("budgettest: this child process ran the %s check of %s for its parent, and sent the outcome", c.child, sub.name())
}

// rerunSchedules is how many controlled schedules a violation a free run
// found is tried on, on its own scenario, to be met again with a schedule
// that replays it.
const rerunSchedules = 64

// rerunUnderControl takes err, what check ck found in its free runs, and,
// when it is a violation of the Linearizable check that no schedule
// replays, runs its scenario again in the controlled stage's child, on
// rerunSchedules schedules: a violation met there comes back told in the
// budget's own lines, with its replay. Otherwise err is returned, saying
// that the rerun did not meet it.
func (sub Subject[S]) rerunUnderControl(t *testing.T, c call, ck Check, err error) error {
	var f *Failure
	if ck != CheckLinearizable || !errors.As(err, &f) || f.JSONPath == "" || !strings.Contains(f.Detail, "it cannot be replayed") ||
		yield.Instrumented() || inChild() || sub.Remote {
		return err
	}
	if m, _ := control.CurrentMode(); m == control.Off {
		return err
	}
	again := sub.controlledStage(t, c, ck, "-budgettest.replay="+f.JSONPath, fmt.Sprintf("-budgettest.schedules=%d", rerunSchedules))
	var g *Failure
	if errors.As(again, &g) && g.Rule == f.Rule && g.JSONPath != "" { // a violation, saved
		g.Detail = "found by a free run, and met again under control on its scenario:\n" + g.Detail
		return g
	}
	f.Detail = strings.TrimRight(f.Detail, "\n") + fmt.Sprintf("\nits scenario, run again under %d controlled schedules, did not fail", rerunSchedules)
	return f
}

var uncontrolledOnce sync.Once

// uncontrolled says, in one line, that the verdict of check ck was not
// controlled and why; under -budgettest.control=require it is a failure.
func uncontrolled(t *testing.T, ck Check, why string) error {
	line := fmt.Sprintf("budgettest: %s: uncontrolled verdict (free runs only): %s", ck, oneLine(why))
	if m, _ := control.CurrentMode(); m == control.Require {
		return fail(ruleControl, "%s; -budgettest.control=require asks for a controlled verdict", line)
	}
	t.Log(line)
	uncontrolledOnce.Do(func() { fmt.Fprintln(os.Stderr, line) })
	return nil
}

// controlledStage runs the controlled stage of check ck for the call c in
// a child process, when this process is not instrumented itself, and
// returns its failure, or nil. The flags extra go to the child.
func (sub Subject[S]) controlledStage(t *testing.T, c call, ck Check, extra ...string) error {
	if !hasControlledStage(sub, ck) || control.Schedules() == 0 {
		return nil
	}
	if yield.Instrumented() {
		return nil // the check explored schedules itself
	}
	mode, err := control.CurrentMode()
	if err != nil {
		return fail(ruleControl, "%v", err)
	}
	if mode == control.Off {
		return uncontrolled(t, ck, "-budgettest.control=off")
	}
	if sub.Remote {
		return uncontrolled(t, ck, "the subject is Remote: its calls wait on another process, which no schedule of this one orders")
	}
	child, err := control.Binary(sub.typePkgs)
	var u *control.Uncontrolled
	if errors.As(err, &u) {
		return uncontrolled(t, ck, u.Why)
	}
	if err != nil {
		return uncontrolled(t, ck, err.Error())
	}
	if child.Built {
		t.Logf("budgettest: built the instrumented test binary in %v (%d yield points in %s); later runs of unchanged sources reuse it",
			child.Took.Round(time.Millisecond), child.Points, strings.Join(child.Packages, " "))
	}
	id, prior := c.id+"|"+string(ck), c.prior()
	// The child is built without -race: under go test -race it is the
	// child go test ./... ran, on the same sources, and given the same
	// input it runs the same schedules. A pass go test saved is not run
	// again (go test ./... && go test -race ./... runs the stage once).
	var key string
	if len(extra) == 0 {
		key, _ = control.OutcomeKey(c.t, child, id, prior, procs.Base())
	}
	if key != "" && reuseSaved {
		if o, ok := savedPass(child, key); ok {
			t.Logf("%s: the controlled stage's outcome is the one go test without -race had on the same sources, flags and calls (its child is built without the race detector, and would run the same schedules):", sub.name())
			for _, n := range o.Notes {
				t.Logf("%s: %s", sub.name(), n)
			}
			return nil
		}
	}
	timeout := 10 * time.Minute
	spawns.Add(1)
	sp, err := control.Spawn(c.t, child, id, prior, timeout, extra...)
	if err != nil {
		return fail(ruleControl, "%s: the controlled stage could not start: %v", sub.name(), err)
	}
	if sp.Result == nil {
		why := "died"
		if sp.Killed {
			why = "ran out of time"
		}
		return fail(ruleControl, "%s: the child process of the controlled stage %s before it finished (after %v):\n%s",
			sub.name(), why, sp.Elapsed.Round(time.Millisecond), tail(sp.Output, 60))
	}
	o, err := decodeOutcome(sp.Result)
	if err != nil {
		return fail(ruleControl, "%s: the controlled stage's outcome is unreadable: %v", sub.name(), err)
	}
	if key != "" && saveOutcomes && o.Failure == nil && o.Err == "" {
		// For go test -race (above); a cache that cannot be written
		// only costs that run the stage again.
		_ = control.SaveOutcome(child, key, sp.Result)
	}
	for _, n := range o.Notes {
		t.Logf("%s: %s", sub.name(), n)
	}
	switch {
	case o.Failure != nil:
		adoptArtifacts(t, o.Failure)
		return o.Failure
	case o.Err != "":
		return fail(rulePanic, "%s: the controlled stage: %s", sub.name(), o.Err)
	}
	return nil
}

var (
	// reuseSaved says whether controlledStage takes a pass saved under the
	// same key instead of running the child, and saveOutcomes whether it
	// saves the passes it runs: under -race the first, without it the
	// second. Tests set them.
	reuseSaved, saveOutcomes = race.Enabled, !race.Enabled
	// spawns counts the children controlledStage started, for tests.
	spawns atomic.Int64
)

// savedPass returns the pass saved under key, if there is one.
func savedPass(child *control.Child, key string) (childOutcome, bool) {
	data, ok := control.SavedOutcome(child, key)
	if !ok {
		return childOutcome{}, false
	}
	o, err := decodeOutcome(data)
	return o, err == nil && o.Failure == nil && o.Err == ""
}

// decodeOutcome reads what a child wrote.
func decodeOutcome(data []byte) (childOutcome, error) {
	var o childOutcome
	err := json.Unmarshal(data, &o)
	return o, err
}

// adoptArtifacts copies the files a child saved for f into t's artifact
// directory, and makes f name the copies: the child's directory goes when
// it does.
func adoptArtifacts(t *testing.T, f *Failure) {
	for _, p := range []*string{&f.HTMLPath, &f.JSONPath} {
		if *p == "" {
			continue
		}
		data, err := os.ReadFile(*p)
		if err != nil {
			continue
		}
		to := filepath.Join(t.ArtifactDir(), filepath.Base(*p))
		if os.WriteFile(to, data, 0o644) == nil {
			f.Detail = strings.ReplaceAll(f.Detail, *p, to)
			*p = to
		}
	}
	if fl := flag.Lookup("test.artifacts"); (fl == nil || fl.Value.String() != "true") && f.HTMLPath != "" {
		f.Detail += "\n(go test deletes these when the test ends: rerun with -artifacts to keep them)"
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// typePackages returns the import paths of the packages that declare the
// type of b and the types of the values it holds, through pointers,
// interfaces and struct fields, three levels deep: an adapter in your test
// package that wraps another module's budget names that module's package
// too. The standard library's packages are left out.
func typePackages(b any) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(v reflect.Value, depth int)
	walk = func(v reflect.Value, depth int) {
		for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) {
			if v.IsNil() {
				return
			}
			if v.Kind() == reflect.Pointer {
				if p := v.Type().Elem().PkgPath(); p != "" && !seen[p] {
					seen[p] = true
					out = append(out, p)
				}
			}
			v = v.Elem()
		}
		if !v.IsValid() {
			return
		}
		if p := v.Type().PkgPath(); p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
		if depth == 0 || v.Kind() != reflect.Struct {
			return
		}
		for i := range v.NumField() {
			walk(v.Field(i), depth-1)
		}
	}
	walk(reflect.ValueOf(b), 3)
	return slices.DeleteFunc(out, func(p string) bool {
		first, _, _ := strings.Cut(p, "/")
		return !strings.Contains(first, ".") // the standard library
	})
}

// oneLine makes a reason that spans lines (a build's output) one line: its
// first line, the first line of the compiler's or tool's own words after
// it, and how many more there were.
func oneLine(why string) string {
	lines := strings.Split(strings.TrimSpace(why), "\n")
	if len(lines) == 1 {
		return why
	}
	out, rest := lines[0], lines[1:]
	for i, l := range rest {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out += ": " + l
			rest = rest[i+1:]
			break
		}
	}
	if n := len(rest); n > 0 {
		out += fmt.Sprintf(" (and %d more lines)", n)
	}
	return out
}

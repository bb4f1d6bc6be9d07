package budgettest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/race"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/stress"
	"github.com/retrybudget/retrybudget/yield"
)

// A Factory builds a fresh budget for one check. clock is the clock the
// budget must read time from (a ManualClock the check drives); a budget
// that reads the wall clock itself ignores clock and sets
// Subject.WallClock. t is the running check's: t.Cleanup works, and a
// t.Fatal is reported as a Failure of its own (it fails t too). A budget
// with a Close() error method is closed by every check, inside the bubble or
// on the goroutine that built it: a budget that owns goroutines stops them
// there.
type Factory func(t *testing.T, clock budget.Clock) budget.Budget

// A Subject is a budget implementation and the specification it claims to
// follow. The suite validates it before any check runs.
type Subject[S any] struct {
	Name string
	New  Factory
	// Model is the sequential specification: one of the model package's,
	// with the parameters the budget is built with, or your own. A model
	// that implements model.Validator is validated; model.Balanced makes
	// the sequential checks compare Available() with the model's balance;
	// model.Starter lets the Edges check start the budget at any instant.
	Model model.Model[S]
	// Scale and Horizon tell the checks which clock steps matter: Scale is
	// the step around which answers change (a slot width, the time a
	// refill takes to pay for one retry), Horizon the longest that still
	// matters (zero means 100 × Scale). Both are at most 2^52 ns (2^46 ns,
	// about 19.5 hours, with WallClock), and Scale is at most Horizon.
	// Leave both zero to take them from a model that implements
	// model.Timed, as the model package's do. With neither, the suite
	// steps the model's clock itself before any check: a model whose
	// answers change with time fails the subject, since no check would
	// make a clock step; one that ignores time is checked without them.
	Scale, Horizon time.Duration
	// WallClock says the budget reads time.Now itself. Every check then
	// runs inside a testing/synctest bubble, clock steps are time.Sleep,
	// and no step goes backwards.
	WallClock bool
	// Scenarios is how many concurrent histories Linearizable checks; zero
	// means 50.
	Scenarios int
	// Watchdog bounds each piece of a check; zero means 60 s without a
	// call of the budget returning. A piece stuck that long fails as a
	// deadlock.
	Watchdog time.Duration
	// Remote says the budget keeps its state in another process (a Redis
	// or database server, a service) and each call waits on the network.
	// No schedule of this process can order what the server does, and a
	// controlled run would only wait on the network until it fell back, so
	// the controlled stages are not run: each check whose verdict they
	// would have controlled says so in one line (and fails under
	// -budgettest.control=require), and the free runs, which a server's
	// own concurrency reaches, give the verdict. The Amplification check's
	// simulated outage runs in a testing/synctest bubble; a Remote
	// subject's budgets are built, called and closed outside it, so that
	// its client's connections, timers and pools never belong to the
	// bubble. Example_remote puts a Redis budget through the suite this
	// way.
	Remote bool

	// typePkgs are the packages of the first budget's type and of the
	// values it holds, found when the subject is prepared: the controlled
	// stage rewrites them.
	typePkgs []string
	// caller is the call whose checks run, set by stages: the Sequential
	// check's long runs and the Replay check save their pass under its
	// name (see onePassOnSources).
	caller call
}

// A Check names one check of the suite: Run runs each as a subtest of
// that name, and VerifyCheck runs one.
type Check string

// The checks, in the order Run runs them. See Run for what each does.
const (
	CheckModel         Check = "Model"
	CheckSequential    Check = "Sequential"
	CheckLinearizable  Check = "Linearizable"
	CheckRace          Check = "Race"
	CheckInvariant     Check = "Invariant"
	CheckLeak          Check = "Leak"
	CheckReplay        Check = "Replay"
	CheckEdges         Check = "Edges"
	CheckAmplification Check = "Amplification"
)

// Checks returns every check, in the order Run runs them.
func Checks() []Check {
	return []Check{CheckModel, CheckSequential, CheckLinearizable, CheckRace, CheckInvariant,
		CheckLeak, CheckReplay, CheckEdges, CheckAmplification}
}

// Run validates sub, then runs the checks on it as subtests of t, named as
// the Check constants. What each check does, what it needs of the subject,
// and what a pass proves are described once, in the package doc ("The
// checks").
func Run[S any](t *testing.T, sub Subject[S]) {
	t.Helper()
	c := enter(t)
	if c.skip {
		return
	}
	sub, f := sub.prepare(t)
	if c.child != "" {
		if f == nil {
			sub.runChild(t, c)
		}
		return
	}
	if f != nil {
		t.Error(wrapLines(f.Error(), maxLine))
		return
	}
	for _, ck := range Checks() {
		t.Run(string(ck), func(t *testing.T) {
			err := sub.stages(t, c, ck)
			var s skip
			switch {
			case errors.As(err, &s):
				t.Skip(string(s))
			case err != nil:
				t.Error(wrapLines(err.Error(), maxLine))
			}
		})
	}
}

// Verify runs the same checks without subtests and without failing t (but
// a factory that calls t.Fatal fails t itself), and returns every failure
// joined, each prefixed with its check's name, or nil. Under -race the
// Race check runs in a child process of the test binary, so a data race
// there is a Failure Verify returns, like any other, with the detector's
// reports counted, each pair of sites once, and the first one shown. The
// checks that call the budget from many goroutines run in a child too,
// until the Race check has found the budget free of races; a race the
// budget makes in a check run here after that still fails the running
// test when it ends.
func Verify[S any](t *testing.T, sub Subject[S]) error {
	t.Helper()
	return sub.verify(t, Checks())
}

// verify runs the checks cs on sub for Verify and VerifyCheck.
func (sub Subject[S]) verify(t *testing.T, cs []Check) error {
	c := enter(t)
	if c.skip {
		return c.replayed()
	}
	sub, f := sub.prepare(t)
	if c.child != "" {
		if f == nil {
			sub.runChild(t, c)
		}
		return nil
	}
	if f != nil {
		c.record([]part{{Failure: f}})
		return f
	}
	var parts []part
	for _, ck := range cs {
		err := sub.stages(t, c, ck)
		if err == nil || errors.As(err, new(skip)) {
			continue
		}
		p := part{Check: string(ck)}
		if !errors.As(err, &p.Failure) {
			p.Text = err.Error()
		}
		parts = append(parts, p)
	}
	c.record(parts)
	return parts2err(parts)
}

// VerifyCheck validates sub and runs one check on it, as Verify does, and
// returns its failure, or nil. A check whose premise the subject does not
// meet (Invariant for a model of your own, say) returns nil.
func VerifyCheck[S any](t *testing.T, sub Subject[S], c Check) error {
	t.Helper()
	if !slices.Contains(Checks(), c) {
		return fmt.Errorf("budgettest: no check %q; see Checks", c)
	}
	return sub.verify(t, []Check{c})
}

// RunLoop runs the sixteen loop checks of the stress package on l, each in a
// child process, as subtests of t. The four whose cases run goroutines of
// their own (NoGoroutineOutlivesCall, SharedBudgetRespected,
// IgnoringOpEndsTheCall, EveryStartEnds) then run again in the
// instrumented child binary, under controlled schedules, when they passed
// freely (see "Controlled schedules on plain go test" in the package doc).
// A broken promise fails its subtest, and so does a child that died during
// the check; a check l.Skip names is skipped with the reason given. Typical
// usage:
//
//	func TestMyRetryLoop(t *testing.T) {
//		budgettest.RunLoop(t, stress.Loop{Name: "mine", Call: func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
//			return myretry.Do(ctx, b, s.MaxAttempts, s.BaseDelay, s.MaxDelay, op)
//		}})
//	}
func RunLoop(t *testing.T, l stress.Loop) {
	t.Helper()
	if err := loopErr(l); err != nil {
		t.Fatal(err)
	}
	for _, c := range stress.LoopChecks() {
		// Each check's child runs inside its subtest, so that the
		// subtest's time is the check's.
		t.Run(c.Name, func(t *testing.T) {
			if why, ok := l.Skip[c.Name]; ok {
				t.Skipf("skipped by %s's Loop.Skip: %s", l.Name, why)
			}
			outcomes := stress.IsolatedLoopChecks(t, l, 0, c.Name)
			if outcomes == nil {
				return // the child: the check has run
			}
			switch o := outcomes[c.Name]; o.Result {
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

// loopErr returns an error for a loop the checks cannot run, before any
// subtest starts (stress.IsolatedLoopChecks, called in each, would fail
// each the same way): one with no Call, or whose Skip names something that
// is not a check, a typo that would run the check it meant to skip.
func loopErr(l stress.Loop) error {
	if l.Call == nil {
		return fmt.Errorf("budgettest: loop %q has a nil Call: set Loop.Call to a function that runs one call of the loop, under the budget and Settings it is given", l.Name)
	}
	var names, unknown []string
	for _, c := range stress.LoopChecks() {
		names = append(names, c.Name)
	}
	for k := range l.Skip {
		if !slices.Contains(names, k) {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Errorf("budgettest: loop %q skips unknown check %s; the checks are %s", l.Name, strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	return nil
}

// prepare validates sub, takes its timing from the model when it gives
// none, and builds its first budget.
func (sub Subject[S]) prepare(t *testing.T) (Subject[S], *Failure) {
	sub, f := sub.checked()
	if f != nil {
		return sub, f
	}
	f = sub.probe(t, &sub.typePkgs)
	return sub, f
}

// stages runs check ck of the call c: its controlled stage in a child
// process, when it has one and this binary is not instrumented, and then,
// if that passed, the check itself, whose free runs are the stage that
// sees data races under -race and what control does not reach. The
// controlled stage comes first so that a budget it fails gets the same
// failure, with its schedule to replay, on every run. Under the race
// detector the Race check, and the checks that call the budget from many
// goroutines until the Race check has found it free of races, run in a
// child process (see freeChild), whose reports come back summarized in
// the check's Failure: no raw report is printed before the verdict.
func (sub Subject[S]) stages(t *testing.T, c call, ck Check) error {
	sub.caller = c
	if err := sub.controlledStage(t, c, ck); err != nil {
		return err
	}
	if race.Enabled && !yield.Instrumented() {
		if _, clean := raceClean.Load(c.id); ck == CheckRace || (callsConcurrently(ck) && !clean) {
			return sub.rerunUnderControl(t, c, ck, sub.freeChild(t, c, ck))
		}
	}
	return sub.rerunUnderControl(t, c, ck, sub.run(t, ck))
}

// callsConcurrently reports whether check ck calls the budget from more
// than one goroutine.
func callsConcurrently(ck Check) bool {
	return ck != CheckModel && ck != CheckSequential
}

// run runs one check and maps what went wrong to a Failure.
func (sub Subject[S]) run(t *testing.T, c Check) error {
	f, ok := checks[S]()[c]
	if !ok {
		return fmt.Errorf("budgettest: no check %q; see Checks", c)
	}
	err := f(t, sub)
	if errors.As(err, new(skip)) {
		return err
	}
	if f := sub.failure(err); f != nil {
		return f
	}
	return nil
}

// skip is a check's reason for not running on a subject.
type skip string

func (s skip) Error() string { return string(s) }

// A Failure is one broken rule.
type Failure struct {
	Rule     string // the promise broken
	Where    string // the line of the suite that found it broken, file:line
	Detail   string // what happened: the minimized scenario, the history
	HTMLPath string // porcupine's rendering, for a linearizability violation
	JSONPath string // the history and scenario as a linearizability.Fixture, for a violation
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "broken rule: %s\nchecked at %s\n%s", f.Rule, f.Where, strings.TrimRight(f.Detail, "\n"))
	return b.String()
}

// maxLine is the longest line Run prints of a Failure, before the
// indentation go test adds (four spaces a level of subtests, and its
// file:line), so that what a person reads stays within 200 characters.
const maxLine = 176

// wrapLines breaks every line of s longer than width at spaces, each
// continuation indented as its line and four more: a report Run prints has
// no line a person must scroll. (A Failure's own text is left whole, for
// the code that reads it.)
func wrapLines(s string, width int) string {
	lines := strings.Split(s, "\n")
	out := lines[:0:0]
	for _, l := range lines {
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))] + "    "
		for len(l) > width {
			cut := strings.LastIndexByte(l[:width], ' ')
			if cut <= len(indent) {
				break // no space to break at: left as it is
			}
			out = append(out, l[:cut])
			l = indent + strings.TrimLeft(l[cut:], " ")
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

package budgettest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
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
	// Watchdog bounds each piece of a check; zero means 60s. A piece still
	// running then fails as a deadlock.
	Watchdog time.Duration

	// typePkgs are the packages of the first budget's type and of the
	// values it holds, found when the subject is prepared: the controlled
	// stage rewrites them.
	typePkgs []string
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
// the Check constants:
//
//   - Model: the model is deterministic (the same state and operation give
//     the same state and answer, two Inits are equal) and never panics, on
//     2000 random operations. Needs: Model.
//   - Sequential: a rapid state machine applies random operations, bursts of
//     one operation and trickles of small clock steps to the budget and to
//     the model, and fails on the first answer (or balance, when the model
//     is a model.Balanced and the budget has Available() float64) that
//     differs, shrunk to a short sequence. Then long runs (4 of 100,000
//     operations, 2 under -race) compare every answer and balance too:
//     phases of random mixes and of calls with a share of retries from none
//     (steady success) to all (an outage), asking for a retry at every edge
//     of the model (where one more success or clock step would change its
//     answer). They find arithmetic that parts from the model only after
//     hundreds of calls (a count in float64 rounding at a threshold); the
//     failure shows the shortest run it found in 3 s. Needs: Model; Scale
//     for time.
//   - Linearizable: Scenarios concurrent histories (4 goroutines of 100
//     operations, and a clock goroutine when Scale is set) are recorded and
//     checked against the model with porcupine. A violation is narrowed to
//     the operations around it, minimized, explained, and saved as HTML and
//     JSON under t.ArtifactDir(). A search that times out fails as
//     inconclusive, never passes. Its controlled stage (see "Controlled
//     schedules on plain go test" in the package doc) runs first: every
//     scenario under -budgettest.schedules controlled schedules (package
//     yield), with the budget built inside the controlled run so that the
//     goroutines its factory starts are scheduled too. A violation is
//     minimized on fixed schedules, its schedule is shrunk to fewer
//     preemptions, and the failure prints the -budgettest.replay flag that
//     replays it exactly. Then each scenario runs once freely.
//   - Race: 64 goroutines call the budget at once, with GOMAXPROCS raised to
//     at least 8. For most models only the race detector sees what goes
//     wrong here: run go test -race; without it the check finds panics,
//     deadlocks and calls too slow to finish. For an in-flight model
//     (model.InFlightLimit) the run is the in-flight stress run, whose
//     limit on the retries in flight is checked at every grant, with or
//     without -race. It always runs freely: under control every switch
//     between goroutines is a synchronization, and the detector would see
//     none. Under -race it runs in a child process of the test binary, and
//     the detector's reports come back as one Failure: how many, each pair
//     of sites once, and the first report in full.
//   - Invariant: for any model, two burst runs: many goroutines make the
//     same call at once, and since every order of identical calls is the
//     same sequence, the budget must grant exactly what the model grants
//     for that many calls (no more: a check-then-act; no fewer: a lost
//     credit) and end in the model's state. Between bursts the budget is
//     walked, one call at a time, to an edge (drained, full, a credit
//     off), two goroutines duel there, and now and then a burst is a
//     volume of 70,000 calls at one instant. Then, for the model package's
//     models, three stress runs checked against the family's conservation
//     invariant at every grant (a token bucket never grants more than its
//     balance and credits, a ratio never more than its window allows, a
//     throttle never at or below half its maximum). Those stress runs have
//     a controlled stage, which runs first: one schedule of each strategy
//     per seed, on 4 goroutines of 20 calls a phase, and a failure names
//     the schedule. Under -race one free stress run is made instead of
//     three: the detector makes each five to ten times slower.
//   - Leak: after 200 calls and Close, no goroutine the budget started is
//     left (goleak; on the wall clock, the synctest bubble).
//   - Replay: fixed edge-case sequences replayed against the model: a
//     drain; 140,000 calls at one instant; refill fractions; and, each on a
//     budget of its own, clock jumps beside the overflow thresholds of
//     elapsed × rate and across every order of magnitude to 2^62.
//   - Edges: the budget built on a clock that starts at instants where slot
//     arithmetic breaks (negative ones, the ends of int64), then driven
//     across slot boundaries. Needs: a model.Starter to start anywhere but
//     0; skipped on the wall clock, which cannot be set. Fuzz runs the same
//     target under go test -fuzz.
//   - Amplification: a simulated 100% outage (package sim), in which the
//     budget may grant no more retries than its model does: it catches a
//     budget built per call site and a refund that keeps it from draining.
//     For an in-flight model every attempt of the outage takes 1s, so that
//     calls are in flight long enough to be limited.
//
// A model that is model.Structured (an in-flight budget's, such as
// model.InFlight) changes what the checks draw: whole calls, as a retry
// loop makes them, with AttemptEnd and CallEnd, so that nothing ends that
// never started, and the minimizer keeps that structure. Its budget must
// be a budget.InFlightBudget, or the subject is turned away. The
// Linearizable check's scenarios then start with calls and retries left in
// flight; Race and Invariant, for a model that is also a
// model.InFlightLimit, run the in-flight stress instead of the families'
// runs: 64 goroutines make calls while the retries surely in flight are
// held to the rule's limit at every grant; with only a background in
// flight the budget must grant what the model grants (a leaked or doubly
// released permit shows there); and two calls on two cores ask at once for
// the one slot left, round after round until 5,000 rounds had them
// overlap (3s at most), where a second grant is a check-then-act, minimized
// to the fewest calls in flight. Leak makes whole calls and Replay ramps the
// calls in flight up to hundreds and back. The Model check draws calls too,
// and Reset for a model.Resetter.
//
// A subject that fails validation, or a factory that fails on its first
// call, gets one Failure and no checks. A panic in the budget, a call that
// never returns (after Watchdog) and a leaked goroutine are Failures with
// rules of their own; none crashes the test binary.
//
// What the suite can and cannot prove. A failure is real: every check
// compares the budget with its model on something the budget did. A pass
// is evidence, not proof: the controlled stages explore a fixed set of
// schedules, not every schedule, and the free runs see only the
// interleavings that happened, so run under -race too. A budget that
// deadlocks fails by the watchdog, and its stuck goroutines are left
// behind.
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
		t.Error(f)
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
				t.Error(err)
			}
		})
	}
}

// Verify runs the same checks without subtests and without failing t (but
// a factory that calls t.Fatal fails t itself), and returns every failure
// joined, each prefixed with its check's name, or nil. Under -race the
// Race check runs in a child process of the test binary, so a data race
// there is a Failure Verify returns, like any other, with the detector's
// reports counted and the first one shown; a race the budget makes in
// another check still fails the running test when it ends.
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

// RunLoop runs the thirteen loop checks of the stress package on l, each in a
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
	outcomes := stress.IsolatedLoopChecks(t, l, 0) // fails t at once on an unknown Skip key
	if outcomes == nil {
		return // the child: the checks have run
	}
	for _, c := range stress.LoopChecks() {
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
// detector the Race check runs in a child process (see raceStage), whose
// reports come back as one Failure.
func (sub Subject[S]) stages(t *testing.T, c call, ck Check) error {
	if err := sub.controlledStage(t, c, ck); err != nil {
		return err
	}
	if ck == CheckRace && raceEnabled && !yield.Instrumented() {
		return sub.raceStage(t, c)
	}
	return sub.run(t, ck)
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

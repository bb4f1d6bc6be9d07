package linearizability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/control"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/procs"
	"github.com/retrybudget/retrybudget/internal/sched"
	"github.com/retrybudget/retrybudget/model"
)

const (
	linGoroutines = 4
	linOps        = 100
	linClockSteps = 20
	// Every other scenario is shorter (see scenario): PCT's chance of
	// placing a preemption in a given window falls with the run's length,
	// and the search for an order costs more than linearly in it.
	linControlledOps        = 40
	linControlledClockSteps = 10
	// A history of 420 operations of a sliding-window ratio took over 30s
	// to search under -race on a loaded 2-core machine: a check cut short
	// is a failure, so the bound is generous.
	linTimeout = 2 * time.Minute
)

// scenario draws the concurrent scenario of one seed.
//
// For a structured model (an in-flight budget) each goroutine makes whole
// calls, and Before leaves calls and retries in flight (up to 40 and 8),
// so that the goroutines' retries meet near the budget's limit, where a
// grant decided on a stale count shows.
func (se *searcher[S]) scenario(seed uint64) Scenario {
	if se.tg.Draw != nil {
		return se.tg.Draw(seed)
	}
	src := harness.Rand(rand.New(rand.NewPCG(seed, 0)))
	tm := harness.Timing{Scale: se.tg.Scale, Horizon: se.tg.Horizon, Forward: se.tg.WallClock}
	// Two shapes in turn, the same in every process (budgettest's child,
	// budgetcheck's run, a free one), so that every route explores the
	// same scenarios: long ones for odd seeds, where a lost update shows
	// only after many more calls drain what it left wrong, and short ones
	// from states long runs reach for even seeds, where a controlled
	// schedule's few preemptions fall more often in the window that
	// matters.
	short := seed%2 == 0
	ops, steps := linOps, linClockSteps
	if short {
		ops, steps = linControlledOps, linControlledClockSteps
	}
	g, c := harness.Lists(src, linGoroutines, ops, steps, tm)
	if !harness.IsStructured(se.tg.Model) {
		s := Scenario{Goroutines: g, Clock: c, WallClock: se.tg.WallClock}
		if short {
			// The shorter scenarios start from states the longer ones
			// reach: a prefix, one call at a time, of up to 240
			// operations (none for one seed in five), which a search
			// for an order takes in linear time.
			var now time.Duration
			for range int(seed%5) * 60 {
				op := harness.Op(src, tm, now)
				if op.Op == model.Advance {
					now += op.D
				}
				s.Before = append(s.Before, op)
			}
		}
		return s
	}
	for i := range g {
		g[i] = harness.CallOps(src, ops)
	}
	return Scenario{Before: harness.OpenCalls(src, 40, 8), Goroutines: g, Clock: c, WallClock: se.tg.WallClock, Structured: true}
}

// trial records s once on a budget of sub, in a bubble for a wall-clock
// subject, and checks the history; under control, rep is the run's report.
func (se *searcher[S]) trial(t *testing.T, s Scenario) (res Result[S], rep sched.Report, err error) {
	hs := se.harness(t)
	err = hs.InBubble(t, "a recorded run", func(t *testing.T) error {
		h, r, err := recordControlled(context.Background(), s, se.harness(t).New)
		if err != nil {
			return err
		}
		rep = r
		res = Check(se.tg.Model, h, se.timeout())
		return nil
	})
	return res, rep, err
}

// explore records s once freely and, under control, once more per
// schedule explored, and returns the first violation or inconclusive
// result with the scenario that gave it: under control, s with the
// schedule that replays it. The free run stays, after the controlled ones, so that a budget the
// rewrite did not reach (another module's) is checked as before. A
// scenario with its Control set is run once, under it. Without freely,
// only the controlled runs are made, schedules of them: what fails then
// fails on every run.
func (se *searcher[S]) explore(t *testing.T, s Scenario, seed uint64, freely bool, schedules int, free *int) (Result[S], Scenario, error) {
	runs := []*sched.Options{s.Control}
	if s.Control == nil && se.controlled() {
		// The controlled runs first: a violation they show is reported
		// with its schedule and minimized deterministically.
		runs = nil
		for k := range schedules {
			runs = append(runs, controlOptions(s, seed, k))
		}
		if freely {
			runs = append(runs, nil)
		}
	}
	var res Result[S]
	for _, ctl := range runs {
		c := s
		c.Control = ctl
		r, rep, err := se.trial(t, c)
		if err != nil {
			return r, c, err
		}
		if rep.Free {
			*free++
			se.fellBack(rep)
		}
		res = r
		if r.Verdict != Linearizable {
			if ctl != nil {
				o := rep.Options
				c.Control = &o
			}
			return r, c, nil
		}
	}
	return res, s, nil
}

// A Target is a budget to search for a violation of its model: how to
// build one, and the shape of the scenarios to run on it.
type Target[S any] struct {
	// Name names the budget in what a Finding says and in the files it
	// saves; empty means "the budget".
	Name  string
	Model model.Model[S]
	// New builds a fresh budget on clock for one run; t is the test, or
	// the bubble's, that the run belongs to.
	New func(t *testing.T, clock budget.Clock) budget.Budget
	// Scale and Horizon are the clock steps that matter to the budget, as
	// budgettest.Subject's; zero Scale means the clock is not stepped.
	Scale, Horizon time.Duration
	// WallClock says the budget reads time.Now itself: each run is made in
	// a testing/synctest bubble, and the clock never goes backwards.
	WallClock bool
	// Scenarios is how many random scenarios are run; zero means 50.
	Scenarios int
	// Watchdog bounds the search, and then the narrowing of what it found;
	// zero means 60s. A search still running then is reported as stuck.
	Watchdog time.Duration
	// Replay, when set, is run in place of the first scenario, and alone.
	Replay *Scenario
	// Timeout bounds each check of one history; zero means 2 minutes. A
	// check cut short is inconclusive, never a pass. The Watchdog does not
	// count the time a check takes.
	Timeout time.Duration

	// Draw, when set, draws the scenario of a seed (1, 2, ...) in place
	// of the search's own.
	Draw func(seed uint64) Scenario
	// Free, when set, makes every run a free one, in a process whose code
	// is rewritten too: for a budget whose calls wait on another process,
	// where a controlled run would only fall back.
	Free bool
	// Log, when set, takes the search's summary lines (how much of the
	// exhaustive stage ran) in place of t.Log: for a caller that reports
	// them elsewhere, as budgettest's child process does to its parent.
	Log func(line string)

	// Record, when set, records a scenario's history in place of a run on
	// a budget from New: for a budget in another process, such as a
	// server's. Its runs are free ones (no schedule controls them), and a
	// violation they show is reported as found, without narrowing.
	Record func(s Scenario) (model.History, error)
}

// A Finding is what a search found: a violation explained, or a check that
// did not end.
type Finding struct {
	// Verdict is Violation or Inconclusive.
	Verdict Verdict
	// Detail is the report: the scenario, minimized, the schedule that
	// replays it and how its calls met, and why no order explains them.
	Detail string
	// HTMLPath and JSONPath are the files saved for a violation: the
	// history as porcupine renders it, and as a Fixture.
	HTMLPath, JSONPath string
}

// searcher is one search of a Target.
type searcher[S any] struct {
	tg Target[S]
	// blocked, once controlled runs have fallen back because their
	// goroutines stayed blocked outside instrumented code (a network
	// call, a pipe, a lock of code not rewritten), is why: the rest of the
	// search runs freely, as for a Free target, since every controlled run
	// would wait out its stall and fall back the same way.
	blocked   string
	fallbacks int // controlled runs that fell back so far
}

// fellBack notes a controlled run that fell back to free running for a
// reason other than its step bound.
//
// Three such runs stop control: one alone may be a stall of a loaded
// machine, and a verdict must not lose its control to that.
func (se *searcher[S]) fellBack(rep sched.Report) {
	if rep.Free && !rep.Exhausted && rep.Reason != "" && se.blocked == "" {
		if se.fallbacks++; se.fallbacks >= 3 {
			se.blocked = rep.Reason
		}
	}
}

func (se *searcher[S]) name() string {
	if se.tg.Name == "" {
		return "the budget"
	}
	return se.tg.Name
}

// harness returns the target as the runs see it, with a factory that
// passes t to New.
func (se *searcher[S]) harness(t *testing.T) harness.Subject[S] {
	return harness.Subject[S]{
		Name:      se.name(),
		Model:     se.tg.Model,
		New:       func(c budget.Clock) budget.Budget { return se.tg.New(t, c) },
		Timing:    harness.Timing{Scale: se.tg.Scale, Horizon: se.tg.Horizon, Forward: se.tg.WallClock},
		WallClock: se.tg.WallClock,
		Watchdog:  se.tg.Watchdog,
	}
}

// summary logs a summary line of the search: through Target.Log, or t.Log.
func (se *searcher[S]) summary(t *testing.T, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if se.tg.Log != nil {
		se.tg.Log(line)
		return
	}
	t.Helper()
	t.Log(line)
}

func (se *searcher[S]) timeout() time.Duration {
	if se.tg.Timeout > 0 {
		return se.tg.Timeout
	}
	return linTimeout
}

// Search looks for a history of tg's budget that no order explains under
// its model, and returns what it found, or nil when every run had an
// order.
//
// Under control (code that budgetcheck rewrote, see package yield) it
// first runs small scenarios at the model's edges under every schedule
// with at most two preemptions (the smallest again with three inside
// calls), then the random
// scenarios, each under a few controlled schedules and once freely; a
// violation is narrowed to the operations that matter, minimized, its
// schedule shrunk to the fewest preemptions, and told in the budget's own
// lines. Without control the runs are free, and what a violation shows
// depends on the machine's scheduler.
//
// The error is a fault of the budget or its factory met on the way (a
// panic, a deadlock past the watchdog), of the internal/harness kind that
// budgettest maps to its rules.
func Search[S any](t *testing.T, tg Target[S]) (*Finding, error) {
	se := &searcher[S]{tg: tg}
	switch {
	case tg.Model == nil:
		return nil, errors.New("linearizability: Search: the target has no Model")
	case tg.New == nil && tg.Record == nil:
		return nil, errors.New("linearizability: Search: the target has neither New nor Record")
	}
	if tg.Record != nil {
		return se.recorded(t)
	}
	// Whether this budget may race is learned anew (see sched.Options.Fine).
	sched.ResetFine()
	if se.controlled() {
		defer procs.One()() // see package procs: the free runs of parallel tests still get theirs
	}
	n := tg.Scenarios
	if n <= 0 {
		n = 50
	}
	replay := tg.Replay
	var viol *Result[S]
	var failing Scenario
	var seed uint64
	var free int
	var exhaustive string // what found the violation, when the exhaustive stage did
	var found *Finding
	err := se.harness(t).Guard("the linearizability check", func() error {
		if replay != nil {
			n = 1 // the replayed scenario, in place of scenario 1
		}
		if se.controlled() && replay == nil {
			// The exhaustive stage first: a violation it finds is small,
			// with at most its bound of preemptions, and so is its story.
			v, s, what, f, err := se.exhaustStage(t)
			if err != nil || f != nil {
				found = f
				return err
			}
			if v != nil {
				viol, failing, exhaustive = v, s, what
				return nil
			}
		}
		for seed = 1; seed <= uint64(n); seed++ {
			s := se.scenario(seed)
			if replay != nil {
				s = *replay
			}
			res, s, err := se.explore(t, s, seed, !inChild(), control.Schedules(), &free)
			if err != nil {
				return err
			}
			switch res.Verdict {
			case Inconclusive:
				found = &Finding{Verdict: Inconclusive, Detail: fmt.Sprintf("%s: scenario %d: %s", se.name(), seed, res.Explain())}
				return nil
			case Violation:
				viol, failing = &res, s
				return nil
			}
		}
		return nil
	})
	if free > 0 {
		t.Logf("%s: %d controlled runs of the Linearizable check fell back to free running (a goroutine blocked outside instrumented code)", se.name(), free)
	}
	if se.blocked != "" && !se.tg.Free {
		se.summary(t, "controlled runs fell back to free running three times, so the rest of the search ran freely: %s", se.blocked)
	}
	if err != nil || viol == nil {
		return found, err
	}
	// The runs that narrow and minimize the violation are guarded too: a
	// budget that deadlocks only now and then may do it in one of them.
	err = se.harness(t).Guard("minimizing a violation", func() error {
		f := se.explainViolation(t, failing, *viol, seed)
		if exhaustive != "" {
			f.Detail = "found by " + exhaustive + ";\n" + f.Detail
		}
		found = f
		return nil
	})
	if err != nil {
		// What was found is reported as it was found: the fault met while
		// minimizing it (a budget that deadlocks now and then) says
		// nothing against the violation.
		which := fmt.Sprintf("scenario %d", seed)
		if exhaustive != "" {
			which = exhaustive
		}
		html, js, note := report(t, *viol, Fixture{Name: se.name() + "-violation", Budget: se.name(), Rule: linearizableRule, Scenario: &failing})
		replay := noReplay
		if failing.Control != nil {
			replay = fmt.Sprintf("under the controlled schedule %s\nreplay it with: %s\n", scheduleText(*failing.Control), replayCommand(failing, js))
		}
		return &Finding{Verdict: Violation, HTMLPath: html, JSONPath: js,
			Detail: fmt.Sprintf("%s: %s failed; it was not minimized, since minimizing it did not finish: %v\n%s%s%s%s",
				se.name(), which, firstLine(err.Error()), failing, replay, viol.Explain(), note)}, nil
	}
	return found, nil
}

// recorded is the search of a target whose histories Record makes: each
// scenario once, free, and the first that fails as it is.
func (se *searcher[S]) recorded(t *testing.T) (*Finding, error) {
	n := se.tg.Scenarios
	if n <= 0 {
		n = 50
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		s := se.scenario(seed)
		h, err := se.tg.Record(s)
		if err != nil {
			return nil, err
		}
		res := Check(se.tg.Model, h, se.timeout())
		switch res.Verdict {
		case Inconclusive:
			return &Finding{Verdict: Inconclusive, Detail: fmt.Sprintf("%s: scenario %d: %s", se.name(), seed, res.Explain())}, nil
		case Violation:
			html, js, note := report(t, res, Fixture{Name: se.name() + "-violation", Budget: se.name(), Scenario: &s})
			return &Finding{Verdict: Violation, HTMLPath: html, JSONPath: js,
				Detail: fmt.Sprintf("%s: scenario %d failed:\n%s%s%s", se.name(), seed, s, res.Explain(), note)}, nil
		}
	}
	return nil, nil
}

// minimizeWithin bounds the time the Linearizable check spends narrowing
// and minimizing a violation.
const minimizeWithin = 6 * time.Second

// narrow tries the focused scenarios of a violation (see
// [focus]) until one fails again or elapsed reaches within,
// and returns the first that failed with its witness, or s and res if none
// did. The focused scenarios are small, and a run of one takes tens of
// microseconds, but a race between two calls shows in perhaps one run of
// ten thousand without -race: three tries in four go to the first, the
// likeliest, the fourth to the last.
func narrow[S any](focus []Scenario, s Scenario, res Result[S], within time.Duration,
	elapsed func() time.Duration, fails func(Scenario) (Result[S], bool)) (Scenario, Result[S]) {
	if len(focus) == 0 {
		return s, res
	}
	for i := 0; elapsed() < within; i++ {
		c := focus[0]
		if i%4 == 3 {
			c = focus[len(focus)-1]
		}
		if r, ok := fails(c); ok {
			return c, r
		}
	}
	return s, res
}

// minimizeTries is how many runs minimize gives each smaller scenario of a
// failing one of n operations: a small scenario runs quickly and may need
// thousands of runs to meet its race again; a large one, that fails more
// readily, gets at least 20.
func minimizeTries(n int) int {
	return max(20, 4000/max(n, 1))
}

// smallWitness is the size of a minimized violation small enough that the
// minimizer does not try again from the whole scenario: two or three
// overlapping calls and one to set the state up.
const smallWitness = 4

// minimizeSchedules is how many schedules a smaller scenario of n
// operations gets under control while minimizing: the same ones every
// time, many for a small scenario, whose runs are quick and whose bad
// interleaving is one of few.
func minimizeSchedules(n int) int {
	return max(2, 256/max(n, 1))
}

// shrinkSchedule makes the failing schedule of s preempt less often (a
// preemption is a step at which the goroutine that had the baton could
// have gone on). It first searches the schedules with one preemption, and
// then, for a short run, those with two, exhaustively, in order: the run
// that never preempts (sched.Serial), switched at one step to another
// goroutine, then at a later step again, going on without preempting.
// When neither holds a failing run it shrinks greedily: it keeps the
// shortest prefix of the choices, up to a preemption, after which the run
// still fails without preempting again, then tries letting the goroutine
// preempted at each preemption left go on. Each run is a replay, so the
// result is the same every time; it stops after within. It returns the
// number of preemptions before and after.
func (se *searcher[S]) shrinkSchedule(t *testing.T, s Scenario, w Result[S], within time.Duration) (Scenario, Result[S], int, int) {
	deadline := time.Now().Add(within)
	run := func(o sched.Options) (Result[S], sched.Report, bool) {
		c := s
		c.Control = &o
		r, rep, err := se.trial(t, c)
		return r, rep, err == nil && r.Verdict == Violation && !rep.Free
	}
	r, cur, ok := run(*s.Control)
	if !ok {
		return s, w, 0, 0 // no replay to shrink
	}
	w = r
	before := len(cur.Preemptions)
	// A candidate keeps a prefix of the choices and lets the run go on
	// without preempting.
	prefix := func(order []int) sched.Options {
		o := cur.Options
		o.Strategy = sched.Serial()
		o.Schedule = order
		return o
	}
	better := func(o sched.Options) bool {
		r, rep, ok := run(o)
		if ok && len(rep.Preemptions) < len(cur.Preemptions) {
			cur, w = rep, r
			return true
		}
		return false
	}
	goroutines := slices.Max(cur.Options.Schedule) + 1
	// switched returns the candidates that switch base, a schedule that
	// never preempts after step from, to another goroutine at one step
	// after from, and runs them until one fails; it returns the reports of
	// those that did not.
	switched := func(base []int, from int) (bool, []sched.Report) {
		var tried []sched.Report
		for j := from + 1; j < len(base); j++ {
			for g := range goroutines {
				if g == base[j] || !time.Now().Before(deadline) {
					continue
				}
				o := prefix(append(slices.Clone(base[:j]), g))
				r, rep, ok := run(o)
				if ok && len(rep.Preemptions) < len(cur.Preemptions) {
					cur, w = rep, r
					return true, nil
				}
				tried = append(tried, rep)
			}
		}
		return false, tried
	}
	if len(cur.Preemptions) > 1 {
		_, serial, _ := run(prefix(nil))
		found, once := switched(serial.Options.Schedule, -1)
		for _, rep := range once {
			if found || len(cur.Preemptions) <= 2 || len(rep.Options.Schedule) > shortSchedule || len(rep.Preemptions) != 1 {
				break
			}
			found, _ = switched(rep.Options.Schedule, rep.Preemptions[0])
		}
		if found {
			s.Control = &cur.Options
			return s, w, before, len(cur.Preemptions)
		}
	}
	// First the shortest prefix, up to a preemption, after which the run
	// still fails without preempting again.
	for _, i := range cur.Preemptions {
		if !time.Now().Before(deadline) || better(prefix(slices.Clone(cur.Options.Schedule[:i+1]))) {
			break
		}
	}
	// Then each preemption left in turn, the choice made the goroutine
	// that had the baton.
	for changed := true; changed; {
		changed = false
		for _, i := range cur.Preemptions {
			if !time.Now().Before(deadline) {
				break
			}
			order := slices.Clone(cur.Options.Schedule[:i+1])
			order[i] = order[i-1]
			if better(prefix(order)) {
				changed = true
				break // the steps after i have moved
			}
		}
	}
	s.Control = &cur.Options
	return s, w, before, len(cur.Preemptions)
}

// plural spells n things: "1 preemption", "3 preemptions".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// shortSchedule is the longest schedule whose two-preemption variants
// shrinkSchedule searches: their number grows with its square.
const shortSchedule = 64

// minimizeBudget is the time left to minimize in, of within, after spent
// has gone on narrowing: never less than a twelfth of within, so that a
// narrowing that took all its time still leaves the minimizer some.
func minimizeBudget(within, spent time.Duration) time.Duration {
	return max(within-spent, within/12)
}

// explainViolation narrows and minimizes the failing scenario, saves it, and
// builds the one Failure that explains it.
func (se *searcher[S]) explainViolation(t *testing.T, s Scenario, res Result[S], seed uint64) *Finding {
	start := time.Now()
	// Under control a smaller scenario is tried on the same schedules
	// every time, so minimizing is deterministic: the scenario that fails,
	// with the schedule that makes it fail, is kept.
	var last *sched.Options // the schedule of the last failing run, under control
	fails := func(c Scenario) (Result[S], bool) {
		if !se.controlled() {
			r, _, err := se.trial(t, c)
			return r, err == nil && r.Verdict == Violation
		}
		// First the failing run's own choices: on the scenario itself they
		// replay it, and on a smaller one they are followed while they
		// apply, so that a deletion late in a goroutine keeps the
		// interleaving before it. Then the same few schedules as for any
		// scenario.
		if s.Control != nil {
			o := *s.Control
			tc := c
			tc.Control = &o
			if r, rep, err := se.trial(t, tc); err == nil && r.Verdict == Violation {
				got := rep.Options
				last = &got
				return r, true
			}
		}
		var free int
		r, w, err := se.explore(t, c, 0, false, minimizeSchedules(c.len()), &free)
		if err == nil && r.Verdict == Violation {
			last = w.Control
			return r, true
		}
		return r, false
	}
	from := s.len()
	elapsed := func() time.Duration { return time.Since(start) }
	tries := minimizeTries
	if se.controlled() {
		tries = func(int) int { return 1 }
	}
	var best Scenario
	var witness Result[S]
	if se.controlled() {
		// Deterministic: each focused scenario is tried once.
		best, witness = s, res
		for _, c := range focus(res, s) {
			if r, ok := fails(c); ok {
				best, witness = c, r
				break
			}
		}
	} else {
		best, witness = narrow(focus(res, s), s, res, minimizeWithin*3/4, elapsed, fails)
	}
	// minimizeFrom minimizes from start, and returns the smallest failing
	// scenario with its witness and, under control, its schedule.
	minimizeFrom := func(start Scenario, within time.Duration) (Scenario, Result[S], bool) {
		last = nil
		var first []Scenario
		if quiet, ok := withoutQuiet(se.tg.Model, start); ok {
			first = append(first, quiet)
		}
		rep := minimize(start, tries(start.len()), within, fails, first...)
		if rep.Witness.Verdict != Violation {
			return start, rep.Witness, false
		}
		to := rep.To
		to.Control = last
		return to, rep.Witness, true
	}
	starts := []Scenario{best}
	if se.controlled() && best.len() != s.len() {
		// Deletion stops at a scenario from which no one operation can
		// go: from the focused scenario, whose prefix leads to one exact
		// state, that can be larger than what the whole scenario leads
		// to. Under control both are cheap and deterministic to try.
		starts = append(starts, s)
	}
	best.Control = s.Control
	for i, start := range starts {
		if i > 0 && best.len() <= smallWitness {
			break
		}
		left := minimizeBudget(minimizeWithin, elapsed())
		if i < len(starts)-1 {
			left /= 2
		}
		if to, w, ok := minimizeFrom(start, left); ok && (i == 0 || to.len() < best.len()) {
			best, witness = to, w
		}
	}
	var switches string
	if best.Control != nil && len(best.Control.Schedule) > 0 {
		var before, after int
		best, witness, before, after = se.shrinkSchedule(t, best, witness, minimizeBudget(minimizeWithin, elapsed()))
		switches = fmt.Sprintf(" (%s)", plural(after, "preemption"))
		if before > after {
			switches = fmt.Sprintf(" (%s, shrunk from %d)", plural(after, "preemption"), before)
		}
	}
	html, js, note := report(t, witness, Fixture{
		Name: se.name() + "-violation", Budget: se.name(), Rule: linearizableRule, Scenario: &best,
	})
	var order string
	if best.Control != nil {
		order = fmt.Sprintf("under the controlled schedule %s%s\nreplay it with: %s\n", scheduleText(*best.Control), switches, replayCommand(best, js))
		// The schedule told in the budget's own lines, from one more
		// replay with its steps traced.
		// In the bubble a wall-clock budget's runs are made in, as every
		// other run: outside one its clock steps would be real sleeps.
		var story string
		err := se.harness(t).InBubble(t, "telling the interleaving", func(t *testing.T) error {
			var err error
			story, err = interleaving(context.Background(), se.tg.Model, best, se.harness(t).New)
			return err
		})
		if err == nil {
			order += story
		} else {
			t.Logf("%s: the interleaving could not be told: %v", se.name(), err)
		}
	}
	if best.Control == nil {
		order = noReplay
	}
	which := fmt.Sprintf("scenario %d", seed)
	if seed == 0 {
		which = "the scenario" // the exhaustive stage's, named before
	}
	return &Finding{Verdict: Violation, HTMLPath: html, JSONPath: js, Detail: fmt.Sprintf("%s: %s failed; %s:\n%s%s%s%s",
		se.name(), which, shrunkFrom(from, best.len(), time.Since(start)), best, order, witness.Explain(), note)}
}

// noReplay says that a violation a free run found has no schedule to
// replay: no controlled run met it.
const noReplay = "found by a free run, whose interleaving no schedule recorded: it cannot be replayed; run the test again, or with more -budgettest.schedules\n"

// shrunkFrom says how minimizing a failing scenario of from operations,
// for d, went: to operations, or none smaller found.
func shrunkFrom(from, to int, d time.Duration) string {
	d = d.Round(time.Millisecond)
	if to >= from {
		return fmt.Sprintf("%s; no smaller failing scenario was found in %v", plural(from, "operation"), d)
	}
	return fmt.Sprintf("minimized from %d to %d operations in %v", from, to, d)
}

// The shape of the Invariant check's controlled stress runs: a few
// goroutines, since PCT finds a bug of depth d with a probability that
// falls as they grow and two are enough to interleave; fewer calls, since
// every call is several yield points; and one schedule of each strategy

// linearizableRule is the promise a violation breaks, as budgettest names
// it, for the fixture saved with one.
const linearizableRule = "every concurrent history has an order, consistent with real time, that the model accepts"

// controlled reports whether this process explores controlled schedules
// itself: its code is instrumented (a child of budgettest's suite, or a run
// of cmd/budgetcheck). The policy is package internal/control's.
func controlled() bool { return control.Controlled() }

// controlled is controlled() for this search: never for a Free target.
func (se *searcher[S]) controlled() bool { return controlled() && !se.tg.Free && se.blocked == "" }

// inChild reports whether this process is a child that runs only the
// controlled stage of a check: it then skips the free runs its parent made.
func inChild() bool { return control.InChild() }

// controlOptions returns the options of the k-th schedule explored for the
// scenario of seed: about three yield points per operation, the one
// between operations, and a load and an update inside most budgets.
func controlOptions(s Scenario, seed uint64, k int) *sched.Options {
	o := control.Options(seed, k, 3*s.len())
	return &o
}

// replayCommand is the flag that replays s, for a failure message: the
// scenario itself when it is short, else the file saved with it (a
// Fixture, which -budgettest.replay reads too), so that no line of the
// report runs long.
func replayCommand(s Scenario, file string) string {
	js, err := json.Marshal(s)
	if err != nil {
		return ""
	}
	if file != "" && len(js) > lineWidth-40 {
		return fmt.Sprintf("-budgettest.replay=%s", file)
	}
	return fmt.Sprintf("-budgettest.replay='%s'", js)
}

// firstLine is the first line of s.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// scheduleText is o as a report prints it: whole when short, else without
// its choices, which the replay file holds.
func scheduleText(o sched.Options) string {
	if full := o.String(); len(full) <= lineWidth {
		return full
	}
	switches := 0
	for i := 1; i < len(o.Schedule); i++ {
		if o.Schedule[i] != o.Schedule[i-1] {
			switches++
		}
	}
	n := len(o.Schedule)
	o.Schedule = nil
	return fmt.Sprintf("%s, %d choices with %d switches (in the replay file)", o, n, switches)
}

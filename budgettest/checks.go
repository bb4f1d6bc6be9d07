package budgettest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/control"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/race"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/internal/sim"
	"github.com/retrybudget/retrybudget/internal/stressrun"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

// checks maps each Check to the function that runs it. Each returns a
// *Failure, a *harness.Fault (mapped to its rule by the caller), a skip, or
// nil.
func checks[S any]() map[Check]func(*testing.T, Subject[S]) error {
	return map[Check]func(*testing.T, Subject[S]) error{
		CheckModel:         checkModel[S],
		CheckSequential:    checkSequential[S],
		CheckLinearizable:  checkLinearizable[S],
		CheckRace:          checkRace[S],
		CheckInvariant:     checkInvariant[S],
		CheckLeak:          checkLeak[S],
		CheckReplay:        checkReplay[S],
		CheckEdges:         checkEdges[S],
		CheckAmplification: checkAmplification[S],
	}
}

// modelSteps is how many random operations the Model check applies.
const modelSteps = 2000

func checkModel[S any](t *testing.T, sub Subject[S]) error {
	m := sub.Model
	name := sub.name()
	err := harness.Guard("the model check", sub.Watchdog, func() error {
		src := harness.Rand(rand.New(rand.NewPCG(1, 2)))
		tm := sub.harness(t).Timing
		a, b := m.Init(), m.Init()
		if !m.Equal(a, b) || m.Hash(a) != m.Hash(b) {
			return fail(ruleModel, "%s: two calls of Init give different states: %s and %s", name, m.DescribeState(a), m.DescribeState(b))
		}
		var now time.Duration
		_, resets := m.(model.Resetter[S])
		structured := harness.IsStructured(m)
		var callers [8]harness.Caller
		for i := range modelSteps {
			op := harness.Op(src, tm, now)
			who := src.IntN(len(callers), "caller")
			switch {
			case resets && src.IntN(50, "reset") == 0:
				op = model.OpReset
			case structured && op.Op != model.Advance:
				op = callers[who].Next(src)
			}
			if op.Op == model.Advance {
				now += op.D
			}
			a2, ga := m.Step(a, op)
			b2, gb := m.Step(b, op)
			callers[who].Answer(op, ga)
			if ga != gb || !m.Equal(a2, b2) || m.Hash(a2) != m.Hash(b2) {
				return fail(ruleModel, "%s: step %d, %v from state %s gave %s (%v) once and %s (%v) the next time",
					name, i+1, op, m.DescribeState(a), m.DescribeState(a2), ga, m.DescribeState(b2), gb)
			}
			a, b = a2, b2
		}
		return nil
	})
	var h *harness.Fault
	if errors.As(err, &h) && h.Cause == harness.Panicked {
		return fail(ruleModel, "%s: the model panicked: %v\n%s", name, h.Value, h.Stack)
	}
	return err
}

func checkSequential[S any](t *testing.T, sub Subject[S]) error {
	hs := sub.harness(t)
	var report string
	var failed bool
	var stats seqcheck.Stats
	err := hs.Guard("the sequential check", func() error {
		return hs.InBubble(t, "the sequential check", func(t *testing.T) error {
			hs := sub.harness(t)
			report, failed = seqcheck.FalsifyHere(t, func(rt *rapid.T) { seqcheck.Check(rt, hs, &stats) })
			return nil
		})
	})
	if err != nil {
		return err
	}
	if f := stats.Fault(); f != nil {
		ff := sub.failure(f)
		if strings.Contains(report, "history:\n") {
			ff.Detail += "\nrapid's shrunk sequence, " + strings.TrimRight(report[strings.LastIndex(report, "history:\n"):], "\n")
		}
		return ff
	}
	if failed {
		if strings.Contains(report, "flaky test") {
			// rapid replays a failure to shrink it; the budget answered
			// the same calls otherwise the second time.
			return fail(ruleSequential, "%s: a sequence of calls failed, and the same calls on a new budget did not fail again: "+
				"the budget's answers depend on more than its calls and the clock it is given (the wall clock, state shared between budgets, randomness), "+
				"so the failure could not be shrunk. rapid's report:\n%s", sub.name(), report)
		}
		return fail(ruleSequential, "%s: rapid's shrunk counterexample:\n%s", sub.name(), report)
	}
	return sub.longRuns(t)
}

// The Sequential check's long runs: longRunCount() runs of longOps operations
// each (half as many runs under -race, which slows them fivefold and finds
// nothing more in one goroutine), seeded from -budgettest.seed, and the
// time a divergence's shrinking may take.
const (
	longOps    = 100_000
	longShrink = 3 * time.Second
)

// longRunCount is how many long runs the Sequential check makes: 4, or 2
// under -race or -short.
func longRunCount() uint64 {
	if fewerFreeRuns() {
		return 2
	}
	return 4
}

// fewerFreeRuns reports whether the checks make fewer of their free runs:
// under -race, which slows them five to ten times, and under -short, which
// asks for a quick verdict. The controlled stages, the exhaustive one
// included, run whole either way.
func fewerFreeRuns() bool { return race.Enabled || testing.Short() }

// shortScenarios is how many random scenarios the Linearizable check runs
// under -short when the subject does not say (50 otherwise).
const shortScenarios = 10

// scenarioCount is the Scenarios the Linearizable check asks for.
func (sub Subject[S]) scenarioCount() int {
	if sub.Scenarios == 0 && testing.Short() {
		return shortScenarios
	}
	return sub.Scenarios
}

// longRuns runs the Sequential check's second stage: long runs against the
// model (see seqcheck.Long), which find arithmetic that parts from it only
// after hundreds of operations, such as float64 counts rounding at a
// threshold; rapid's short sequences do not reach there. Under -race a
// pass of go test is taken instead (see onePassOnSources).
func (sub Subject[S]) longRuns(t *testing.T) error {
	summary := fmt.Sprintf("%d runs of %d operations", longRunCount(), longOps)
	return sub.onePassOnSources(t, "long runs", summary, func() error {
		longRunsMade.Add(1)
		hs := sub.harness(t)
		var d *seqcheck.Divergence
		var seed uint64
		err := hs.Guard("the sequential check's long runs", func() error {
			return hs.InBubble(t, "the sequential check's long runs", func(t *testing.T) error {
				hs := sub.harness(t)
				for k := range longRunCount() {
					seed = control.SeedBase()*longRunCount() + k + 1
					if d = seqcheck.Long(hs, seed, longOps); d != nil {
						seqcheck.Shrink(hs, d, longShrink)
						return nil
					}
				}
				return nil
			})
		})
		if err != nil || d == nil {
			return err
		}
		return fail(ruleSequential, "%s: long run %d (of %d operations, seed %d) parted from the model: %v", sub.name(), seed-control.SeedBase()*longRunCount(), longOps, seed, d)
	})
}

// onePassOnSources runs stage, a part of a check in which one goroutine
// calls the budget, on a clock the check moves, operations that do not
// depend on chance (the Sequential check's long runs, the Replay check's
// sequences): its verdict is the budget's arithmetic, which the race
// detector cannot change. It sees a caller racing a budget's own goroutine
// in rapid's sequences and in the Race and Invariant checks as well, which
// make the same calls from many goroutines. So plain go test saves the
// stage's pass (summary says what passed), as it saves a controlled
// stage's, and go test -race of the same sources, flags and calls takes it
// instead of running the stage again, and logs so; without a saved pass it
// runs it. A failure is never saved.
func (sub Subject[S]) onePassOnSources(t *testing.T, stage, summary string, run func() error) error {
	store, key := sub.passKey(stage)
	if key != "" && reuseSaved {
		if data, ok := control.SavedOutcome(store, key); ok {
			var saved stagePass
			if json.Unmarshal(data, &saved) == nil && saved.Passed != "" {
				t.Logf("%s: %s: the pass go test without -race had on the same sources, flags and calls (%s); one goroutine calls the budget there, so the race detector would see nothing the Race check does not",
					sub.name(), stage, saved.Passed)
				return nil
			}
		}
	}
	err := run()
	if err == nil && key != "" && saveOutcomes {
		if data, jerr := json.Marshal(stagePass{Passed: summary}); jerr == nil {
			_ = control.SaveOutcome(store, key, data) // unsaved, go test -race runs the stage
		}
	}
	return err
}

// stagePass is what onePassOnSources saves of a stage's pass.
type stagePass struct{ Passed string }

// longRunsMade counts the times longRuns made its runs, for tests.
var longRunsMade atomic.Int64

// passKey returns where the pass of stage in this call is saved, and its
// key; "" when it cannot be named (no call, in a child, the sources
// unknown to the go command).
func (sub Subject[S]) passKey(stage string) (*control.Child, string) {
	c := sub.caller
	if c.t == nil || inChild() {
		return nil, ""
	}
	store, err := control.Runs()
	if err != nil {
		return nil, ""
	}
	key, err := control.OutcomeKey(c.t, store, c.id+"|"+stage, c.prior(), 0)
	if err != nil {
		return nil, ""
	}
	return store, key
}

// Scenario sizes of the Linearizable check.

// checkLinearizable runs the search of package linearizability on the
// subject, once, and maps what it found to a Failure.
func checkLinearizable[S any](t *testing.T, sub Subject[S]) error {
	replay, err := replayScenario()
	if err != nil {
		return fail(ruleLinearizable, "%v", err)
	}
	found, err := linearizability.Search(t, linearizability.Target[S]{
		Name: sub.name(), Model: sub.Model, New: sub.New, Scale: sub.Scale, Horizon: sub.Horizon,
		WallClock: sub.WallClock, Scenarios: sub.scenarioCount(), Watchdog: sub.Watchdog, Replay: replay,
		Log: func(line string) { note(t, sub.name(), line) }, Free: sub.Remote,
	})
	if err != nil || found == nil {
		return err
	}
	if found.Verdict == linearizability.Inconclusive {
		return fail(ruleConclusive, "%s", found.Detail)
	}
	f := fail(ruleLinearizable, "%s", found.Detail)
	f.HTMLPath, f.JSONPath = found.HTMLPath, found.JSONPath
	return f
}

// per seed.
const (
	controlledStressGoroutines = 4
	controlledStressOps        = 20
	controlledStressSchedules  = 3
)

// stressConfig is the shape of the Race and Invariant runs.
func (sub Subject[S]) stressConfig(seed uint64) stressrun.Config {
	c := stressrun.Config{Goroutines: 64, Ops: 50, Timeout: sub.Watchdog, Seed: seed}
	if !sub.WallClock {
		c.ClockStep = sub.Scale
	}
	return c
}

func checkRace[S any](t *testing.T, sub Subject[S]) error {
	if _, ok := sub.Model.(model.InFlightLimit); ok && harness.IsStructured(sub.Model) {
		return sub.inFlightStress(t, 0)
	}
	// Unstamped: the log's stamps would order the calls for the race
	// detector, which then saw only the races of calls that overlapped in
	// time, and, with the cores busy, sometimes none.
	c := sub.stressConfig(0)
	c.Unstamped = true
	run, err := sub.stress(t, c)
	if err == nil {
		sub.logCutShort(t, "the race run", run)
	}
	return err
}

// stress makes one stress run, in a testing/synctest bubble for a
// wall-clock subject: outside one its budget reads the real clock, which
// moves while the model's does not, and a correct bucket's refill looks
// like an over-grant.
func (sub Subject[S]) stress(t *testing.T, c stressrun.Config) (*stressrun.Run, error) {
	if !sub.WallClock {
		return stressrun.Stress(c, sub.harness(t))
	}
	var run *stressrun.Run
	err := sub.harness(t).InBubble(t, "a stress run", func(t *testing.T) error {
		var err error
		run, err = stressrun.Stress(c, sub.harness(t))
		return err
	})
	return run, err
}

// logCutShort logs that a free stress run stopped starting calls at its
// time bound: slow under contention, not stuck, and checked on the calls
// it made.
func (sub Subject[S]) logCutShort(t *testing.T, what string, run *stressrun.Run) {
	if run.CutShort {
		t.Logf("%s: %s was cut short at its time bound, in phase %d, after %d calls: the budget is slow under contention (64 goroutines), and the calls made were checked",
			sub.name(), what, len(run.Clock)-1, len(run.Entries))
	}
}

// inFlightStress makes the in-flight stress run of one seed, for a
// structured model with an InFlightLimit, and maps a violation to the
// Invariant rule.
func (sub Subject[S]) inFlightStress(t *testing.T, seed uint64) error {
	err := stressrun.InFlight(stressrun.InFlightConfig{Seed: seed, Timeout: sub.Watchdog}, sub.harness(t))
	if v, w := (*stressrun.InFlightViolation)(nil), (*stressrun.BurstViolation)(nil); errors.As(err, &v) || errors.As(err, &w) {
		return fail(ruleInFlight, "%s: in-flight stress run of seed %d: %v", sub.name(), seed, err)
	}
	return err
}

// burstsWithin bounds the time a burst run starts calls in: a correct
// budget makes one in a second or two, under the race detector too.
const burstsWithin = 10 * time.Second

// burstSeeds are the seeds of the Invariant check's burst runs, one run
// each; familySeeds those of its stress runs for a model of the model
// package, whose invariants the runs' logs are checked against.
var (
	burstSeeds  = []uint64{1, 2}
	familySeeds = []uint64{1, 2, 3}
)

func checkInvariant[S any](t *testing.T, sub Subject[S]) error {
	if _, ok := sub.Model.(model.InFlightLimit); ok && harness.IsStructured(sub.Model) {
		seeds := familySeeds
		if fewerFreeRuns() {
			seeds = familySeeds[:1]
		}
		var stages []func() error
		for _, seed := range seeds {
			stages = append(stages, func() error { return sub.inFlightStress(t, seed) })
		}
		return firstError(stages...)
	}
	var stages []func() error
	for _, seed := range burstSeeds {
		stages = append(stages, func() error {
			hs := sub.harness(t)
			// The time bound's timer runs outside the bubble, on real
			// time: inside, a spinning budget would stop the fake clock.
			var stop atomic.Bool
			timer := time.AfterFunc(burstsWithin, func() { stop.Store(true) })
			defer timer.Stop()
			err := hs.Guard("a burst run", func() error {
				return hs.InBubble(t, "a burst run", func(t *testing.T) error {
					cut, err := stressrun.BurstsCut(stressrun.BurstConfig{Seed: seed, Stop: &stop}, sub.harness(t))
					if cut && err == nil {
						t.Logf("%s: the burst run of seed %d was cut short at its time bound (%v): the budget is slow under contention, and the calls made were checked", sub.name(), seed, burstsWithin)
					}
					return err
				})
			})
			if m := (*stressrun.Mismatch)(nil); errors.As(err, &m) {
				return fail(ruleBursts, "%s: burst run of seed %d: %v", sub.name(), seed, err)
			}
			return err
		})
	}
	// The bursts hold for any model; the family invariants need one of the
	// model package's. On instrumented code the stress runs are explored
	// under control first, on fewer goroutines, so that a grant the
	// invariants forbid shows on every run.
	if stressrun.HasInvariant(sub.Model) && controlled() && !sub.Remote {
		var controlledStages []func() error
		for _, seed := range familySeeds {
			for k := range min(control.Schedules(), controlledStressSchedules) {
				controlledStages = append(controlledStages, func() error {
					c := sub.stressConfig(seed)
					c.Goroutines, c.Ops = controlledStressGoroutines, controlledStressOps
					o := control.Options(seed, k, 3*c.Goroutines*c.Ops)
					c.Control = &o
					run, err := sub.stress(t, c)
					if err != nil {
						return err
					}
					if _, err := run.Check(sub.Model); err != nil {
						return fail(ruleInvariant, "%s: stress run of seed %d, %d goroutines under the controlled schedule %s (phase p runs with seed+p): %v",
							sub.name(), seed, c.Goroutines, c.Control, err)
					}
					return nil
				})
			}
		}
		if inChild() {
			// A child runs the controlled stage only: its parent made
			// the free runs.
			return firstError(controlledStages...)
		}
		stages = append(controlledStages, stages...)
	}
	if stressrun.HasInvariant(sub.Model) {
		seeds := familySeeds
		if fewerFreeRuns() {
			// Each free stress run takes five to ten times as long
			// under the detector: one instead of three keeps
			// go test -race ./... within its time; -short asks for
			// the same. On instrumented code the controlled runs
			// above are made in full.
			seeds = familySeeds[:1]
		}
		for _, seed := range seeds {
			stages = append(stages, func() error {
				run, err := sub.stress(t, sub.stressConfig(seed))
				if err != nil {
					return err
				}
				sub.logCutShort(t, fmt.Sprintf("the stress run of seed %d", seed), run)
				if _, err := run.Check(sub.Model); err != nil {
					return fail(ruleInvariant, "%s: stress run of seed %d, 64 goroutines: %v", sub.name(), seed, err)
				}
				return nil
			})
		}
	}
	return firstError(stages...)
}

// firstError runs the stages in turn, up to the first that fails, and
// returns its error.
func firstError(stages ...func() error) error {
	for _, stage := range stages {
		if err := stage(); err != nil {
			return err
		}
	}
	return nil
}

func checkLeak[S any](t *testing.T, sub Subject[S]) error {
	hs := sub.harness(t)
	var lineage harness.Lineage
	err := hs.Guard("the leak check", func() error {
		// On the wall clock the bubble itself fails if a goroutine is left.
		return hs.InBubble(t, "the leak check", func(t *testing.T) error {
			lineage = harness.Descend(func() {
				b, closeBudget := sub.harness(t).Open(new(budget.ManualClock))
				if harness.IsStructured(sub.Model) {
					// Whole calls, ends included, 8 in flight at a time.
					src := harness.Rand(rand.New(rand.NewPCG(3, 4)))
					var callers [8]harness.Caller
					for calls := 0; calls < 200; {
						c := &callers[src.IntN(len(callers), "caller")]
						op := c.Next(src)
						c.Answer(op, harness.Perform(b, op))
						if op.Op == model.CallEnd {
							calls++
						}
					}
				}
				for i := range 200 {
					harness.Perform(b, model.OpRequest)
					k := []model.Kind{model.Transient, model.Throttled}[i%2]
					if harness.Perform(b, model.OpRetry(k)) {
						harness.Perform(b, model.OpSuccess(k))
					}
				}
				closeBudget()
			})
			return nil
		})
	})
	if err != nil {
		return err
	}
	// Only the goroutines the budget started count, not those a test
	// running in parallel started meanwhile. (On the wall clock the
	// bubble has checked.)
	if !sub.WallClock {
		if err := lineage.Gone(harness.GoneWait); err != nil {
			return fail(ruleNoLeak, "%s: after 200 calls and Close: %v", sub.name(), err)
		}
	}
	return checkCloseRace(t, sub)
}

// inFlightRamp is the in-flight replay, drawn with the model's answers so
// that it keeps the call structure: 3000 calls open one at a time, each
// asking for a retry at once and ending at once if it is denied, while
// calls without a retry are kept in flight to some 750, so that the retries granted follow the rule at every count of
// calls in flight; every fifth call a granted retry and its call end.
// Then the calls end one at a time, each end followed by a new call's
// request for a retry, so that the rule is followed down as well as up.
func inFlightRamp[S any](m model.Model[S]) []model.Op {
	state := m.Init()
	var ops []model.Op
	do := func(op model.Op) bool {
		var g bool
		state, g = m.Step(state, op)
		ops = append(ops, op)
		return g
	}
	var open []bool // each open call: whether it holds a granted retry
	call := func() {
		do(model.OpRequest)
		do(model.OpAttemptEnd(model.FirstAttempt))
		if do(model.OpRetry(model.Transient)) {
			open = append(open, true)
		} else {
			do(model.OpCallEnd)
		}
	}
	end := func(i int) {
		if open[i] {
			do(model.OpAttemptEnd(model.Transient))
		}
		do(model.OpCallEnd)
		open = slices.Delete(open, i, i+1)
	}
	for i := range 3000 {
		call()
		if i%5 == 4 && len(open) > 0 {
			end(0)
		}
		for len(open) < i/4 { // calls in flight without a retry, holding none
			do(model.OpRequest)
			do(model.OpAttemptEnd(model.FirstAttempt))
			open = append(open, false)
		}
	}
	for len(open) > 0 {
		end(len(open) - 1)
		if len(open)%3 == 0 {
			call()
			end(len(open) - 1)
		}
	}
	return ops
}

// A replay is one fixed sequence of the Replay check, run on a budget of
// its own.
type replay struct {
	name string
	ops  []model.Op
}

// volumeRounds is how many request-and-success pairs the volume replay
// makes at one instant: past 2^16 of each, and far past 2^32 once a count
// is multiplied by a ratio in parts per million.
const volumeRounds = 70_000

// replays returns the edge-case sequences of the Replay check: a drain; a
// volume of more than 100,000 calls at one instant; a ramp of requests
// and retries; for a budget whose
// answers depend on time, refill fractions and jumps. On a ManualClock the
// jumps are far steps beside every overflow threshold of elapsed × rate
// (harness.Jumps) and across every order of magnitude to 2^62, each on a
// budget of its own; on the wall clock of a bubble, whose timers overflow,
// 1000 horizons.
func (sub Subject[S]) replays() []replay {
	scale, tm := sub.Scale, sub.harness(nil).Timing
	var drain, volume, fractions []model.Op
	for range 600 {
		drain = append(drain, model.OpRetry(model.Transient), model.OpRetry(model.Throttled))
	}
	drain = append(drain, model.OpSuccess(model.Transient), model.OpSuccess(model.FirstAttempt), model.OpRetry(model.Throttled))
	for range volumeRounds {
		volume = append(volume, model.OpRequest, model.OpSuccess(model.FirstAttempt))
	}
	for range 2000 {
		volume = append(volume, model.OpRetry(model.Transient), model.OpRetry(model.Throttled))
	}
	// A ramp: a request, then a retry, over and over at one instant, so
	// that the retries granted follow the allowance call by call and any
	// request count at which it is rounded the wrong way shows.
	// Every seventh step of the ramp also has a throttled retry and a
	// first-attempt success.
	step := []model.Op{model.OpRequest, model.OpRetry(model.Transient)}
	seventh := append(slices.Clone(step), model.OpRetry(model.Throttled), model.OpSuccess(model.FirstAttempt))
	ramp := slices.Repeat(append(slices.Repeat(step, 6), seventh...), 430) // about 3,000 steps
	out := []replay{{"drain", drain}, {"volume", volume}, {"ramp", ramp}}
	if harness.IsStructured(sub.Model) {
		out = append(out, replay{"calls in flight", inFlightRamp(sub.Model)})
		if !sub.WallClock {
			for _, g := range heldGaps() {
				out = append(out, replay{"calls in flight across an idle gap of " + g.name, heldGapReplay(sub.Model, g.d)})
			}
		}
	}
	if scale == 0 {
		return out
	}
	for range 300 {
		fractions = append(fractions, model.OpAdvance(scale/7+1), model.OpRetry(model.Transient), model.OpRequest)
	}
	out = append(out, replay{"fractions", fractions})
	// Calls on the boundaries of the scale, counted from instant 0, where
	// slots are aligned, then a nanosecond before and after them: an
	// instant that starts a slot must count in that slot, and leave the
	// window with it. Each replay makes a volley of requests on one
	// boundary (or a nanosecond beside it), then steps to the boundaries
	// after it, one scale at a time past the horizon, retrying on every
	// one, so that the volley's leaving shows in an answer.
	steps := min(int(max(sub.Horizon, scale)/scale)+3, 64)
	for _, off := range []time.Duration{0, -1, 1} {
		for _, volley := range []int{3, 40, 400} {
			ops := []model.Op{model.OpAdvance(scale + off)}
			for range volley {
				ops = append(ops, model.OpRequest)
			}
			// The first step lands on the next boundary itself, so that
			// the volley and the calls after it are off by off from
			// each other: a slot that is right up to a constant shift
			// (one nanosecond ahead, say) shows.
			next := scale - off
			for range steps {
				ops = append(ops, model.OpRetry(model.Transient), model.OpRetry(model.Throttled), model.OpRequest,
					model.OpSuccess(model.Transient), model.OpAdvance(next))
				next = scale
			}
			out = append(out, replay{fmt.Sprintf("boundaries%+d ns, %d requests", off, volley), ops})
		}
	}
	jumps := harness.Jumps(tm)
	if sub.WallClock {
		far := 1000 * max(sub.Horizon, sub.Scale)
		jumps = []time.Duration{far, far/2 + 1}
	} else {
		// An order of magnitude from the horizon's to 2^62, and a value
		// in each that is neither round nor a power of two.
		src := rand.New(rand.NewPCG(3, 5))
		for e := bits.Len64(uint64(max(sub.Horizon, scale))); e < 63; e++ {
			jumps = append(jumps, time.Duration(int64(1)<<(e-1)+src.Int64N(int64(1)<<(e-1))|1))
		}
	}
	for _, j := range jumps {
		var ops []model.Op
		for range 8 {
			ops = append(ops, model.OpRequest, model.OpRetry(model.Transient), model.OpRetry(model.Throttled))
		}
		ops = append(ops, model.OpAdvance(j), model.OpRetry(model.Transient), model.OpRequest, model.OpRetry(model.Throttled),
			model.OpSuccess(model.Transient), model.OpAdvance(scale), model.OpRetry(model.Transient), model.OpAdvance(scale/3+1),
			model.OpRetry(model.Throttled), model.OpSuccess(model.FirstAttempt))
		out = append(out, replay{fmt.Sprintf("jump of %d ns", int64(j)), ops})
	}
	if !sub.WallClock && !harness.IsStructured(sub.Model) {
		for _, g := range idleGaps(scale, sub.Horizon) {
			out = append(out, replay{"idle gap of " + g.name, gapReplay(sub.Model, g.d, scale)})
		}
	}
	return out
}

// An idleGap is a clock step the Replay check takes after draining a
// budget, with the name it is reported by.
type idleGap struct {
	name string
	d    time.Duration
}

// idleGaps returns the idle gaps at which a narrow counter of time wraps:
// 2^15 to 2^33 slot widths, windows, milliseconds and seconds, where a
// slot tag or a tick kept in 16 or 32 bits comes back to a value it had
// (16 bits of slots alias after 2^16 of them; 32 bits of milliseconds
// after 49.7 days), and 2^31 to 2^33 nanoseconds and microseconds. Each
// appears once, in the first unit that names it; a gap past int64 is left
// out.
func idleGaps(scale, horizon time.Duration) []idleGap {
	units := []struct {
		name string
		d    time.Duration
		from int
	}{
		{"slot widths", scale, 15}, {"windows", horizon, 15}, {"ms", time.Millisecond, 15}, {"s", time.Second, 15},
		{"ns", time.Nanosecond, 31}, {"µs", time.Microsecond, 31},
	}
	// The replay steps on by two widths after the gap: the clock, summed
	// from 0, stays below MaxInt64.
	limit := uint64(math.MaxInt64) - min(2*uint64(max(scale, 0))+1, uint64(math.MaxInt64))
	var out []idleGap
	seen := map[time.Duration]bool{}
	for _, u := range units {
		if u.d <= 0 {
			continue
		}
		for e := u.from; e <= 33; e++ {
			hi, lo := bits.Mul64(uint64(u.d), uint64(1)<<e)
			if hi != 0 || lo > limit {
				break
			}
			d := time.Duration(lo)
			if seen[d] {
				continue
			}
			seen[d] = true
			out = append(out, idleGap{fmt.Sprintf("2^%d %s (%d ns)", e, u.name, int64(d)), d})
		}
	}
	return out
}

// gapReplay is the replay of one idle gap: requests, then retries until
// the model denies one (at most 2000), so that the budget holds counts
// and has spent what it may; then the gap, and calls that show whether
// the budget came back from it as the model does (a stale slot or a
// wrapped tick shows as an answer that differs).
func gapReplay[S any](m model.Model[S], gap, scale time.Duration) []model.Op {
	var ops []model.Op
	s := m.Init()
	step := func(op model.Op) bool {
		ops = append(ops, op)
		var granted bool
		s, granted = m.Step(s, op)
		return granted
	}
	for range 20 {
		step(model.OpRequest)
	}
	for i := range 2000 {
		k := model.Transient
		if i%2 == 1 {
			k = model.Throttled
		}
		if !step(model.OpRetry(k)) {
			break
		}
	}
	ops = append(ops, model.OpAdvance(gap))
	for range 6 {
		ops = append(ops, model.OpRetry(model.Transient), model.OpRetry(model.Throttled), model.OpRequest)
	}
	return append(ops, model.OpSuccess(model.Transient), model.OpAdvance(scale), model.OpRetry(model.Transient),
		model.OpAdvance(scale/3+1), model.OpRetry(model.Throttled), model.OpSuccess(model.FirstAttempt))
}

// heldGaps are the clock steps the Replay check takes while calls are in
// flight, on a budget whose rule counts calls and not time: a minute, five,
// an hour and a day, a second past each (the idle timeouts a budget that
// drops idle state is likely to have), and 2^15 to 2^33 milliseconds and
// seconds, where a narrow counter of time wraps (see idleGaps).
func heldGaps() []idleGap {
	var out []idleGap
	for _, d := range []time.Duration{time.Minute, 5 * time.Minute, time.Hour, 24 * time.Hour} {
		out = append(out, idleGap{fmt.Sprintf("%v and 1s", d), d + time.Second})
	}
	for _, u := range []struct {
		name string
		d    time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}} {
		for e := 15; e <= 33; e++ {
			out = append(out, idleGap{fmt.Sprintf("2^%d %s", e, u.name), u.d << e})
		}
	}
	return out
}

// heldGapReplay is the replay of one gap for an in-flight model, drawn
// with the model's answers: calls open one at a time, each asking for a
// retry, until the model denies one, so that the budget holds calls and
// retries in flight and has granted what it may; then the clock steps
// over the gap with all of them still in flight, and new calls ask for
// retries (a budget that took the idle time for an end of its calls, and
// dropped or reset what it counts, grants one the model denies). Then the
// calls end, one at a time, each end followed by a new call's request for
// a retry, so that the counts after the gap must still add up.
func heldGapReplay[S any](m model.Model[S], gap time.Duration) []model.Op {
	state := m.Init()
	var ops []model.Op
	do := func(op model.Op) bool {
		var g bool
		state, g = m.Step(state, op)
		ops = append(ops, op)
		return g
	}
	var open []bool // each open call: whether it holds a granted retry
	ask := func() bool {
		do(model.OpRequest)
		do(model.OpAttemptEnd(model.FirstAttempt))
		granted := do(model.OpRetry(model.Transient))
		open = append(open, granted)
		return granted
	}
	end := func() {
		if open[len(open)-1] {
			do(model.OpAttemptEnd(model.Transient))
		}
		do(model.OpCallEnd)
		open = open[:len(open)-1]
	}
	for i := 0; i < 1000; i++ {
		if !ask() && i >= 3 {
			break
		}
	}
	do(model.OpAdvance(gap))
	for range 3 {
		ask()
	}
	for len(open) > 0 {
		end()
		if len(open)%2 == 0 {
			ask()
			end()
		}
	}
	return ops
}

// replayReports is how many failed replays the Replay check reports.
const replayReports = 3

// checkReplay runs every replay, and reports the first replayReports that
// fail in one Failure: enough to see a pattern, few enough to read.
func checkReplay[S any](t *testing.T, sub Subject[S]) error {
	rs := sub.replays()
	return sub.onePassOnSources(t, "Replay", fmt.Sprintf("%d sequences", len(rs)), func() error {
		replaysMade.Add(1)
		var errs []string
		report := func() error {
			if len(errs) == 0 {
				return nil
			}
			return fail(ruleReplay, "%s", strings.Join(errs, "\n"))
		}
		for _, r := range rs {
			hs := sub.harness(t)
			err := hs.Guard("the replay "+r.name, func() error {
				return hs.InBubble(t, "the replay "+r.name, func(t *testing.T) error {
					return seqcheck.Replay(sub.harness(t), sub.Model.Init(), 0, r.ops)
				})
			})
			var h *harness.Fault
			switch {
			case errors.As(err, &h):
				return err
			case err != nil:
				errs = append(errs, fmt.Sprintf("%s: replay %q: %v", sub.name(), r.name, err))
				if len(errs) == replayReports {
					return report()
				}
			}
		}
		return report()
	})
}

// replaysMade counts the times checkReplay made its replays, for tests.
var replaysMade atomic.Int64

// amplification is the outage the Amplification check runs: 10 clients × 5
// requests a second, 3 attempts, 5s healthy, 30s at 100% errors, 5s of
// recovery.
var amplification = sim.Config{Clients: 10, Rate: 5, Attempts: 3, Healthy: 5 * time.Second,
	Outage: 30 * time.Second, Recovery: 5 * time.Second, ErrorRate: 1, Seed: 1}

// amplificationAttempt is how long each attempt of the Amplification
// check's outage takes for an in-flight budget: a timeout.
const amplificationAttempt = time.Second

// checkAmplification runs the outage twice, once with each client on a
// budget of sub and once on the model itself, stepped as a budget. Under a
// 100% outage nothing refills a budget but time, so the model's grants are
// the most a correct budget may grant.
func checkAmplification[S any](t *testing.T, sub Subject[S]) error {
	var got, want sim.Result
	err := sub.harness(t).Guard("the amplification check", func() error {
		c := amplification
		c.Outside = sub.Remote // its calls are made outside the bubble: see Config.Outside
		if harness.IsStructured(sub.Model) {
			// Attempts that time out: calls stay in flight, and an
			// in-flight budget has something to limit.
			c.AttemptTime = amplificationAttempt
		}
		c.NewBudget = func(clock budget.Clock) budget.Budget { return harness.ModelBudget(sub.Model, clock) }
		var err error
		if want, err = sim.Run(t, c); err != nil {
			var h *harness.Fault
			if errors.As(err, &h) {
				return fail(ruleModel, "%s: the model, stepped as a budget in the outage simulation: %v", sub.name(), err)
			}
			return err
		}
		c.NewBudget = sub.harness(t).New
		got, err = sim.Run(t, c)
		return err
	})
	if err != nil {
		return err
	}
	if got.Granted > want.Granted {
		return fail(ruleAmplification, "%s: under a 100%% outage the budgets granted %d retries (amplification %.3fx) where the model grants %d (%.3fx): the budget does not bound the load",
			sub.name(), got.Granted, got.Amplification, want.Granted, want.Amplification)
	}
	return nil
}

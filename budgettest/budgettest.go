package budgettest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/sim"
	"github.com/retrybudget/retrybudget/stress"
)

// A Factory builds a fresh budget for one check. clock is the clock the
// budget must read time from (a ManualClock the check drives); t is the
// check's, for t.Cleanup. A budget that reads the wall clock itself ignores
// clock and sets Subject.WallClock.
type Factory func(t *testing.T, clock budget.Clock) budget.Budget

// A Subject is a budget implementation and the specification it claims to
// follow.
type Subject[S any] struct {
	Name string
	New  Factory
	// Model is the sequential specification: one of the model package's,
	// with the parameters the budget is built with, or your own.
	Model model.Model[S]
	// Scale and Horizon tell the checks which clock steps matter (see
	// model and seqcheck): Scale is the step around which answers change
	// (a slot width, the time a refill pays for one retry), Horizon the
	// longest that still matters. A zero Scale means the budget's answers
	// do not depend on time, and no clock steps are made.
	Scale, Horizon time.Duration
	// WallClock says the budget reads time.Now itself. Every check then
	// runs inside a testing/synctest bubble, clock steps are time.Sleep,
	// and no step goes backwards.
	WallClock bool
	// Scenarios is how many concurrent histories Linearizable checks; zero
	// means 50.
	Scenarios int
	// Watchdog bounds each check; zero means 60s. A check still running
	// then fails as a deadlock.
	Watchdog time.Duration
}

// Run runs the checks on sub as subtests of t: Model, Sequential,
// Linearizable, Race, Leak and Replay.
func Run[S any](t *testing.T, sub Subject[S]) {
	t.Helper()
	for _, c := range checks[S]() {
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(t, sub); err != nil {
				t.Error(err)
			}
		})
	}
}

// Verify runs the same checks without subtests and without failing t, and
// returns every failure joined, or nil.
func Verify[S any](t *testing.T, sub Subject[S]) error {
	t.Helper()
	var errs []error
	for _, c := range checks[S]() {
		if err := c.run(t, sub); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// RunLoop runs the ten loop checks of the stress package on l, each in a
// child process, as subtests of t. See stress.CheckLoop.
func RunLoop(t *testing.T, l stress.Loop) {
	t.Helper()
	stress.CheckLoop(t, l)
}

type check[S any] struct {
	name string
	run  func(t *testing.T, sub Subject[S]) error
}

func checks[S any]() []check[S] {
	return []check[S]{
		{"Model", checkModel[S]},
		{"Sequential", checkSequential[S]},
		{"Linearizable", checkLinearizable[S]},
		{"Race", checkRace[S]},
		{"Leak", checkLeak[S]},
		{"Replay", checkReplay[S]},
		{"Amplification", checkAmplification[S]},
	}
}

// A Failure is one broken rule.
type Failure struct {
	Rule     string // the promise broken
	Where    string // where the rule is written, file:line
	Detail   string // what happened: the minimized scenario, the history
	HTMLPath string // porcupine's rendering, for a linearizability violation
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "broken rule: %s\nrule written at %s\n%s", f.Rule, f.Where, strings.TrimRight(f.Detail, "\n"))
	if f.HTMLPath != "" {
		fmt.Fprintf(&b, "\nrendering: %s", f.HTMLPath)
	}
	return b.String()
}

func fail(r rule, format string, args ...any) *Failure {
	return &Failure{Rule: r.text, Where: r.where, Detail: fmt.Sprintf(format, args...)}
}

// factory wraps sub.New so that a panic or a nil budget is a Failure, not
// a crash.
func (sub Subject[S]) factory(t *testing.T) (func(budget.Clock) budget.Budget, *Failure) {
	if sub.New == nil {
		return nil, fail(ruleFactory, "%s: Subject.New is nil", sub.Name)
	}
	var ferr *Failure
	build := func(c budget.Clock) (b budget.Budget) {
		defer func() {
			if p := recover(); p != nil {
				ferr = fail(ruleFactory, "%s: the factory panicked: %v", sub.Name, p)
				b = nil
			}
		}()
		b = sub.New(t, c)
		if b == nil {
			ferr = fail(ruleFactory, "%s: the factory returned a nil budget", sub.Name)
		}
		return b
	}
	// Probe once, so that a broken factory is reported before any check.
	if c, ok := build(new(budget.ManualClock)).(interface{ Close() error }); ok {
		c.Close()
	}
	if ferr != nil {
		return nil, ferr
	}
	return func(c budget.Clock) budget.Budget {
		b := build(c)
		if b == nil {
			panic(ferr)
		}
		return b
	}, nil
}

// advance returns how a check moves time for sub.
func (sub Subject[S]) advance() func(*budget.ManualClock, time.Duration) {
	if !sub.WallClock {
		return nil
	}
	return func(c *budget.ManualClock, d time.Duration) {
		c.Advance(d)
		if d > 0 {
			time.Sleep(d)
		}
	}
}

// inBubble runs f in a synctest bubble for a wall-clock subject, directly
// otherwise.
func (sub Subject[S]) inBubble(t *testing.T, f func(t *testing.T) error) error {
	if !sub.WallClock {
		return f(t)
	}
	var err error
	synctest.Test(t, func(t *testing.T) { err = f(t) })
	return err
}

// watchdog runs f and fails with ruleNoDeadlock if it has not returned
// within the subject's watchdog time. The goroutine running f is left
// behind if it is stuck.
func (sub Subject[S]) watchdog(what string, f func() error) error {
	limit := sub.Watchdog
	if limit <= 0 {
		limit = 60 * time.Second
	}
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				if f, ok := p.(*Failure); ok {
					done <- f
					return
				}
				done <- fail(ruleFactory, "%s: the budget panicked during %s: %v", sub.Name, what, p)
			}
		}()
		done <- f()
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		return fail(ruleNoDeadlock, "%s: %s did not finish within %v; a call into the budget is stuck", sub.Name, what, limit)
	}
}

func checkModel[S any](t *testing.T, sub Subject[S]) error {
	if sub.Model == nil {
		return fail(ruleModel, "%s: Subject.Model is nil", sub.Name)
	}
	r := rand.New(rand.NewPCG(1, 2))
	a, b := sub.Model.Init(), sub.Model.Init()
	if !sub.Model.Equal(a, b) || sub.Model.Hash(a) != sub.Model.Hash(b) {
		return fail(ruleModel, "%s: two calls of Init give different states: %s and %s", sub.Name, sub.Model.DescribeState(a), sub.Model.DescribeState(b))
	}
	for i := range 2000 {
		op := randomOp(r, sub.Scale)
		a2, ga := sub.Model.Step(a, op)
		b2, gb := sub.Model.Step(b, op)
		if ga != gb || !sub.Model.Equal(a2, b2) || sub.Model.Hash(a2) != sub.Model.Hash(b2) {
			return fail(ruleModel, "%s: step %d, %v from state %s gave %s (%v) once and %s (%v) the next time",
				sub.Name, i, op, sub.Model.DescribeState(a), sub.Model.DescribeState(a2), ga, sub.Model.DescribeState(b2), gb)
		}
		a, b = a2, b2
	}
	return nil
}

func randomOp(r *rand.Rand, scale time.Duration) model.Op {
	kinds := []model.Kind{model.FirstAttempt, model.Transient, model.Throttled}
	switch r.IntN(5) {
	case 0:
		return model.OpRequest
	case 1, 2:
		return model.OpRetry(kinds[r.IntN(3)])
	case 3:
		return model.OpSuccess(kinds[r.IntN(3)])
	}
	if scale <= 0 {
		return model.OpRequest
	}
	return model.OpAdvance(time.Duration(r.Int64N(int64(scale)*4 + 1)))
}

func checkSequential[S any](t *testing.T, sub Subject[S]) error {
	newBudget, ferr := sub.factory(t)
	if ferr != nil {
		return ferr
	}
	if sub.Model == nil {
		return fail(ruleModel, "%s: Subject.Model is nil", sub.Name)
	}
	var report string
	var failed bool
	err := sub.watchdog("the sequential check", func() error {
		return sub.inBubble(t, func(t *testing.T) error {
			report, failed = seqcheck.FalsifyHere(t, func(rt *rapid.T) {
				seqcheck.Check(rt, seqcheck.Subject[S]{
					Model:   sub.Model,
					New:     newBudget,
					Timing:  seqcheck.Timing{Scale: sub.Scale, Horizon: sub.Horizon, Forward: sub.WallClock},
					Advance: sub.advance(),
				}, nil)
			})
			return nil
		})
	})
	if err != nil {
		return err
	}
	if failed {
		return fail(ruleSequential, "%s: rapid's shrunk counterexample:\n%s", sub.Name, report)
	}
	return nil
}

func checkLinearizable[S any](t *testing.T, sub Subject[S]) error {
	newBudget, ferr := sub.factory(t)
	if ferr != nil {
		return ferr
	}
	n := sub.Scenarios
	if n <= 0 {
		n = 50
	}
	lsub := linearizability.Subject[S]{
		Model:   sub.Model,
		New:     newBudget,
		Gen:     linearizability.GenConfig{Scale: sub.Scale, Horizon: sub.Horizon, Forward: sub.WallClock},
		Advance: sub.advance(),
	}
	return sub.watchdog("the linearizability check", func() error {
		for seed := range uint64(n) {
			s := linearizability.Generate(rand.New(rand.NewPCG(seed+1, 0)), lsub.Gen)
			var res linearizability.Result[S]
			err := sub.inBubble(t, func(t *testing.T) error {
				var err error
				res, err = linearizability.Trial(context.Background(), lsub, s, 30*time.Second)
				return err
			})
			if err != nil {
				return fail(ruleNoDeadlock, "%s: %v", sub.Name, err)
			}
			switch res.Verdict {
			case linearizability.Inconclusive:
				return fail(ruleConclusive, "%s: seed %d: %s", sub.Name, seed+1, res.Explain())
			case linearizability.Violation:
				return sub.explainViolation(t, lsub, s, res)
			}
		}
		return nil
	})
}

// explainViolation minimizes the failing scenario, renders it, and builds
// the Failure.
func (sub Subject[S]) explainViolation(t *testing.T, lsub linearizability.Subject[S], s linearizability.Scenario, res linearizability.Result[S]) error {
	rep := linearizability.MinimizeWithin(s, 200, 3*time.Second, func(c linearizability.Scenario) (linearizability.Result[S], bool) {
		var r linearizability.Result[S]
		err := sub.inBubble(t, func(t *testing.T) error {
			var err error
			r, err = linearizability.Trial(context.Background(), lsub, c, 30*time.Second)
			return err
		})
		return r, err == nil && r.Verdict == linearizability.Violation
	})
	if rep.Witness.Verdict == linearizability.Violation {
		res = rep.Witness
	}
	spec, _ := linearizability.Spec(sub.Model)
	f := fail(ruleLinearizable, "%s: minimized scenario (from %d to %d operations in %v):\n%s\n%s",
		sub.Name, rep.From.Len(), rep.To.Len(), rep.Elapsed.Round(time.Millisecond), rep.To, res.Explain())
	f.HTMLPath = linearizability.Report(t, res, spec, sub.Name, sub.Name+"-violation")
	return f
}

func checkRace[S any](t *testing.T, sub Subject[S]) error {
	newBudget, ferr := sub.factory(t)
	if ferr != nil {
		return ferr
	}
	cfg := stress.Config{Goroutines: 64, Ops: 50, Timeout: sub.watchdogTime()}
	if !sub.WallClock {
		cfg.ClockStep = sub.Scale
	}
	for seed := range uint64(3) {
		cfg.Seed = seed
		run, err := stress.Stress(context.Background(), cfg, newBudget)
		if errors.Is(err, stress.ErrDeadlock) {
			return fail(ruleNoDeadlock, "%s: %v", sub.Name, err)
		}
		if err != nil {
			return fail(ruleFactory, "%s: %v", sub.Name, err)
		}
		var verr error
		switch m := any(sub.Model).(type) {
		case model.TokenBucket:
			verr = run.CheckTokenBucket(m)
		case model.Ratio:
			verr = run.CheckRatio(m)
		case model.Throttle:
			verr = run.CheckThrottle(m)
		default:
			return nil // a model of your own: the race detector is the check
		}
		if verr != nil {
			return fail(ruleInvariant, "%s: %v", sub.Name, verr)
		}
	}
	return nil
}

func (sub Subject[S]) watchdogTime() time.Duration {
	if sub.Watchdog > 0 {
		return sub.Watchdog
	}
	return 60 * time.Second
}

func checkLeak[S any](t *testing.T, sub Subject[S]) error {
	if sub.WallClock {
		// A bubble fails by itself if a goroutine outlives it.
		return sub.inBubble(t, func(t *testing.T) error { return leakRun(t, sub) })
	}
	before := goleak.IgnoreCurrent()
	if err := leakRun(t, sub); err != nil {
		return err
	}
	if err := goleak.Find(before); err != nil {
		return fail(ruleNoLeak, "%s: %v", sub.Name, err)
	}
	return nil
}

func leakRun[S any](t *testing.T, sub Subject[S]) error {
	newBudget, ferr := sub.factory(t)
	if ferr != nil {
		return ferr
	}
	return sub.watchdog("the leak check", func() error {
		clock := new(budget.ManualClock)
		b := newBudget(clock)
		for i := range 200 {
			b.Request()
			if b.Retry(budget.Kind(1 + i%2)) {
				b.Success(budget.Kind(1 + i%2))
			}
		}
		if c, ok := b.(interface{ Close() error }); ok {
			c.Close()
		}
		return nil
	})
}

// Edge-case sequences, as operation lists (see the fuzz package's seeds).
// far is the longest clock jump: centuries on a ManualClock, less on the
// wall clock of a bubble, whose timers overflow.
func replays(scale, far time.Duration) map[string][]model.Op {
	var drain, fractions, jumps []model.Op
	for range 600 {
		drain = append(drain, model.OpRetry(model.Transient), model.OpRetry(model.Throttled))
	}
	drain = append(drain, model.OpSuccess(model.Transient), model.OpSuccess(model.FirstAttempt), model.OpRetry(model.Throttled))
	if scale > 0 {
		for range 300 {
			fractions = append(fractions, model.OpAdvance(scale/7+1), model.OpRetry(model.Transient), model.OpRequest)
		}
		jumps = []model.Op{model.OpRequest, model.OpRetry(model.Transient), model.OpAdvance(far), model.OpRetry(model.Transient),
			model.OpRequest, model.OpAdvance(scale), model.OpRetry(model.Throttled), model.OpAdvance(far / 2), model.OpRetry(model.Transient)}
	}
	return map[string][]model.Op{"drain": drain, "fractions": fractions, "jumps": jumps}
}

func checkReplay[S any](t *testing.T, sub Subject[S]) error {
	newBudget, ferr := sub.factory(t)
	if ferr != nil {
		return ferr
	}
	var errs []error
	far := time.Duration(1 << 62)
	if sub.WallClock {
		far = 1000 * max(sub.Horizon, sub.Scale)
	}
	for name, ops := range replays(sub.Scale, far) {
		if len(ops) == 0 {
			continue
		}
		err := sub.watchdog("the replay "+name, func() error {
			return sub.inBubble(t, func(t *testing.T) error {
				return seqcheck.Replay(seqcheck.Subject[S]{Model: sub.Model, New: newBudget, Advance: sub.advance()}, sub.Model.Init(), 0, ops)
			})
		})
		var f *Failure
		switch {
		case errors.As(err, &f):
			errs = append(errs, f)
		case err != nil:
			errs = append(errs, fail(ruleReplay, "%s: replay %q: %v", sub.Name, name, err))
		}
	}
	return errors.Join(errs...)
}

func checkAmplification[S any](t *testing.T, sub Subject[S]) error {
	newBudget, ferr := sub.factory(t)
	if ferr != nil {
		return ferr
	}
	var err error
	werr := sub.watchdog("the amplification check", func() error {
		_, _, err = sim.CheckAmplification(t, newBudget, sub.Model)
		return nil
	})
	if werr != nil {
		return werr
	}
	if err != nil {
		return fail(ruleAmplification, "%s: %v", sub.Name, err)
	}
	return nil
}

package budgettest

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/model"
)

// maxStep is the longest Scale or Horizon a subject may give: about 52
// days. Longer steps still reach every instant, through the jumps the
// checks make past the horizon, and the checks' arithmetic on them stays
// far from overflow.
const maxStep = time.Duration(1) << 52

// maxWallStep is the longest Scale or Horizon of a wall-clock subject,
// about 19.5 hours: its steps are sleeps in a testing/synctest bubble,
// whose clock starts in 2000 and whose timers must stay before 2262.
const maxWallStep = time.Duration(1) << 46

// validate checks sub before any check runs, and returns the one Failure
// that names the first field that is wrong.
func (sub Subject[S]) validate() *Failure {
	name := sub.name()
	switch {
	case sub.New == nil:
		return fail(ruleSubject, "%s: Subject.New is nil: give the factory that builds the budget", name)
	case isNil(sub.Model):
		return fail(ruleSubject, "%s: Subject.Model is nil: give the specification the budget claims to follow", name)
	case sub.Scale < 0:
		return fail(ruleSubject, "%s: Subject.Scale is %v; it must be 0 (the answers do not depend on time) or positive", name, sub.Scale)
	case sub.Horizon < 0:
		return fail(ruleSubject, "%s: Subject.Horizon is %v; it must be 0 (100 × Scale) or positive", name, sub.Horizon)
	case sub.Scale > maxStep:
		return fail(ruleSubject, "%s: Subject.Scale is %v, above the %v the checks accept", name, sub.Scale, maxStep)
	case sub.Horizon > maxStep:
		return fail(ruleSubject, "%s: Subject.Horizon is %v, above the %v the checks accept", name, sub.Horizon, maxStep)
	case sub.WallClock && max(sub.Scale, sub.Horizon) > maxWallStep:
		return fail(ruleSubject, "%s: Subject.Scale or Horizon is above %v, the longest step a wall-clock subject may take (its steps are sleeps in a testing/synctest bubble, whose timers overflow in 2262)", name, maxWallStep)
	case sub.Horizon > 0 && sub.Scale == 0:
		return fail(ruleSubject, "%s: Subject.Horizon is %v but Scale is 0, so no clock step would be made: set Scale too", name, sub.Horizon)
	case sub.Horizon > 0 && sub.Scale > sub.Horizon:
		return fail(ruleSubject, "%s: Subject.Scale (%v) is above Subject.Horizon (%v): the horizon is the longest step that matters, the scale a short one", name, sub.Scale, sub.Horizon)
	case sub.Scenarios < 0:
		return fail(ruleSubject, "%s: Subject.Scenarios is %d; it must be 0 (50) or positive", name, sub.Scenarios)
	case sub.Watchdog < 0:
		return fail(ruleSubject, "%s: Subject.Watchdog is %v; it must be 0 (60s) or positive", name, sub.Watchdog)
	}
	if v, ok := sub.Model.(model.Validator); ok {
		var err error
		if p := harness.Catch("the model's Validate", func() { err = v.Validate() }); p != nil {
			return fail(rulePanic, "%s: the model's Validate panicked: %v", name, p)
		}
		if err != nil {
			return fail(ruleSubject, "%s: Subject.Model (%T) is not usable: %v", name, sub.Model, err)
		}
	}
	return nil
}

func isNil(m any) bool {
	if m == nil {
		return true
	}
	v := reflect.ValueOf(m)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Interface, reflect.Chan:
		return v.IsNil()
	}
	return false
}

func (sub Subject[S]) name() string {
	if sub.Name == "" {
		return "the budget"
	}
	return sub.Name
}

// harness returns the subject as every check sees it, with a factory that
// passes t to sub.New.
func (sub Subject[S]) harness(t *testing.T) harness.Subject[S] {
	return harness.Subject[S]{
		Name:      sub.name(),
		Model:     sub.Model,
		New:       func(c budget.Clock) budget.Budget { return sub.New(t, c) },
		Timing:    harness.Timing{Scale: sub.Scale, Horizon: sub.Horizon, Forward: sub.WallClock},
		WallClock: sub.WallClock,
		Watchdog:  sub.Watchdog,
	}
}

// probe builds one budget, uses it once and closes it, so that a broken
// factory is reported once, before any check.
func (sub Subject[S]) probe(t *testing.T, typePkgs *[]string) *Failure {
	hs := sub.harness(t)
	err := hs.Guard("building the first budget", func() error {
		return hs.InBubble(t, "building the first budget", func(t *testing.T) error {
			b, closeBudget := sub.harness(t).Open(new(budget.ManualClock))
			defer closeBudget()
			*typePkgs = typePackages(b)
			harness.Perform(b, model.OpRequest)
			if _, ok := b.(budget.InFlightBudget); harness.IsStructured(sub.Model) && !ok {
				return fail(ruleSubject, "%s: Subject.Model (%T) counts work in flight, but the budget (%T) is not a budget.InFlightBudget: "+
					"it has no AttemptEnd(Kind) and CallEnd() methods, so nothing can tell it when a retry ends, and each granted retry would stay in flight for ever. "+
					"Adapt the budget's release methods to those two", sub.name(), sub.Model, b)
			}
			return nil
		})
	})
	return sub.failure(err)
}

// failure maps an error from a piece of a check to its Failure: a fault to
// the rule of its cause, a Failure to itself.
func (sub Subject[S]) failure(err error) *Failure {
	if err == nil {
		return nil
	}
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	name := sub.name()
	var h *harness.Fault
	if !errors.As(err, &h) {
		return fail(rulePanic, "%s: %v", name, err)
	}
	switch h.Cause {
	case harness.FactoryPanicked:
		return fail(ruleFactory, "%s: %v", name, h)
	case harness.FactoryNil:
		return fail(ruleFactoryNil, "%s: the factory returned a nil budget (during %s)", name, h.During)
	case harness.FactoryExited:
		return fail(ruleFactoryExit, "%s: the factory called t.Fatal, t.FailNow or runtime.Goexit (during %s); the suite reports it here and carries on", name, h.During)
	case harness.MethodPanicked:
		return fail(ruleNoPanic, "%s: %v", name, h)
	case harness.Stuck:
		return fail(ruleNoDeadlock, "%s: %v", name, h)
	case harness.Leaked:
		return fail(ruleNoLeak, "%s: %v (during %s)", name, h.Value, h.During)
	}
	return fail(rulePanic, "%s: %v", name, h)
}

// checked validates sub and returns it with its timing resolved: Scale and
// Horizon from a model.Timed model when the subject gives none, clamped to
// what a wall-clock subject may sleep. A subject that leaves time out while
// its model's answers depend on it fails here, with the two histories that
// show it.
func (sub Subject[S]) checked() (Subject[S], *Failure) {
	if f := sub.validate(); f != nil {
		return sub, f
	}
	if sub.Scale > 0 {
		return sub, nil
	}
	name := sub.name()
	timed, isTimed := sub.Model.(model.Timed)
	if isTimed {
		var scale, horizon time.Duration
		if p := harness.Catch("the model's Timing", func() { scale, horizon = timed.Timing() }); p != nil {
			return sub, fail(rulePanic, "%s: the model's Timing panicked: %v", name, p)
		}
		if scale < 0 || horizon < 0 || horizon < scale || (scale == 0 && horizon != 0) {
			return sub, fail(ruleSubject, "%s: the model's Timing() is (%v, %v): a scale of 0 and a horizon of 0, or a positive scale and a horizon at least as long", name, scale, horizon)
		}
		most := maxStep
		if sub.WallClock {
			most = maxWallStep
		}
		if scale > 0 {
			sub.Scale, sub.Horizon = min(scale, most), min(horizon, most)
			return sub, nil
		}
	}
	if w := timeMatters(sub.Model); w != "" {
		if isTimed {
			return sub, fail(ruleSubject, "%s: the model's Timing() says time changes no answer, but it does:\n%s", name, w)
		}
		return sub, fail(ruleSubject, "%s: Subject.Scale is 0, so no check would move the clock, but the model's answers depend on time:\n%s\nset Subject.Scale and Horizon, or implement model.Timed on %T", name, w, sub.Model)
	}
	return sub, nil
}

// timeSteps are the clock steps timeMatters tries: from a nanosecond to
// centuries, and back.
var timeSteps = []time.Duration{1, 999, time.Millisecond + 3, time.Second - 1, time.Minute + 7, time.Hour, 24 * time.Hour, 366 * 24 * time.Hour, 1<<62 + 12345, -time.Second}

// timeMatters steps m through calls with and without a clock step among
// them, and describes the first pair of histories whose answers (or
// balances, for a model.Balanced) differ; "" when none do. A model that
// panics, or is not deterministic, is left for the Model check to report.
func timeMatters[S any](m model.Model[S]) (witness string) {
	bal, _ := m.(model.Balanced[S])
	src := harness.Rand(rand.New(rand.NewPCG(7, 11)))
	harness.Catch("probing the model's use of time", func() {
		for trial := range 200 {
			calls := make([]model.Op, 1+src.IntN(60, ""))
			for i := range calls {
				calls[i] = harness.Call(src)
			}
			at := src.IntN(len(calls), "")
			d := timeSteps[trial%len(timeSteps)]
			a, a2, b := m.Init(), m.Init(), m.Init()
			var ha, hb []string
			for i, op := range calls {
				if i == at {
					b, _ = m.Step(b, model.OpAdvance(d))
					hb = append(hb, model.OpAdvance(d).String())
				}
				var ga, ga2, gb bool
				a, ga = m.Step(a, op)
				a2, ga2 = m.Step(a2, op)
				b, gb = m.Step(b, op)
				if ga != ga2 || !m.Equal(a, a2) {
					return // not deterministic: the Model check says so
				}
				ha, hb = append(ha, model.Describe(op, ga)), append(hb, model.Describe(op, gb))
				if ga != gb || (bal != nil && bal.Balance(a) != bal.Balance(b)) {
					witness = "  without the clock step: " + strings.Join(ha, ", ") + "\n  with it:                " + strings.Join(hb, ", ")
					return
				}
			}
		}
	})
	return witness
}

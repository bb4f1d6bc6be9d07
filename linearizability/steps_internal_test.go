package linearizability

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/race"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/model"
)

// The steps of Search, one at a time: report, minimize and focus.

// stepsTimeout bounds each check of a history in these tests.
const stepsTimeout = 20 * time.Second

// tightTokens pays for one transient retry, and no second one, from full.
var tightTokens = model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}

// drawScenario draws the scenario of seed: goroutines lists of ops calls,
// and ops/5 clock steps when timing says the budget reads time.
func drawScenario(seed uint64, goroutines, ops int, timing harness.Timing) Scenario {
	g, c := harness.Lists(harness.Rand(rand.New(rand.NewPCG(seed, 0))), goroutines, ops, ops/5, timing)
	return Scenario{Goroutines: g, Clock: c}
}

// The check-then-act mutant uses only atomic operations: go test -race has
// nothing to report, and this test passes under it. The linearizability
// check still finds two retries granted from a balance that pays for one,
// and report saves it.
//
// The runs are free: whether two retries meet inside the window is up to
// the machine. Idle, one of the first few dozen scenarios shows it. With
// both cores busy (two CPU burners and a .ci/run beside), 30 runs met it
// first at scenarios 4 to 3,423, about one in a thousand, and 5,000
// scenarios missed it in one run of twenty: 20,000 make a miss about e^-20
// at that rate. Under control the bug is found on every run
// (internal/subjects/controltest).
func TestCheckThenActIsRaceFreeButNotLinearizable(t *testing.T) {
	newBudget := func(budget.Clock) budget.Budget { return mutants.NewCheckThenAct(tightTokens) }
	const limit = 20_000
	var r Result[model.TokenBucketState]
	var s Scenario
	for seed := uint64(1); r.Verdict != Violation; seed++ {
		if seed > limit {
			t.Fatalf("no violation in %d scenarios", limit)
		}
		s = drawScenario(seed, 4, 100, harness.Timing{})
		h, err := Record(context.Background(), s, newBudget)
		if err != nil {
			t.Fatal(err)
		}
		if r = Check(tightTokens, h, stepsTimeout); r.Verdict == Violation {
			t.Logf("violation at seed %d, %d operations", seed, len(r.History))
		}
	}
	html, js, note := report(t, r, Fixture{Name: t.Name(), Budget: "mutants.CheckThenAct", Rule: "linearizable", Scenario: &s})
	for _, p := range []string{html, js} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("report's file is not where it says (%s): %v", note, err)
		}
	}
	page, _ := os.ReadFile(html)
	for _, want := range []string{"budget: mutants.CheckThenAct", "model:  model.TokenBucket", "rule:   linearizable"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the rendering does not say %q", want)
		}
	}
	f, err := LoadFixture(js)
	if err != nil {
		t.Fatal(err)
	}
	if got := Recheck(f, tightTokens, stepsTimeout); got.Verdict != Violation || f.Scenario == nil {
		t.Errorf("the saved history re-checks as %v (scenario saved: %v), want a violation", got.Verdict, f.Scenario != nil)
	}
	if race.Enabled {
		t.Log("built with -race: the race detector saw no race in the runs above (it would have failed this test)")
	}
}

// minimize on a deterministic predicate: a scenario fails when two
// different goroutines each hold a transient retry. From 400 operations it
// must reach exactly two, one per goroutine, whatever the machine.
func TestMinimizeReachesTheCore(t *testing.T) {
	s := drawScenario(3, 4, 100, harness.Timing{})
	fails := func(c Scenario) (int, bool) {
		n := 0
		for _, g := range c.Goroutines {
			if slices.Contains(g, model.OpRetry(model.Transient)) {
				n++
			}
		}
		return n, n >= 2
	}
	rep := minimize(s, 1, 0, fails)
	if rep.To.len() != 2 || len(rep.To.Goroutines) != 2 || rep.Witness != 2 {
		t.Fatalf("minimized to %d operations in %d goroutines (witness %d), want 2 in 2:\n%s", rep.To.len(), len(rep.To.Goroutines), rep.Witness, rep.To)
	}
	t.Logf("from %d to %d operations in %d runs", rep.From.len(), rep.To.len(), rep.Runs)
	// A scenario that never fails comes back unchanged, with no witness.
	never := minimize(s, 3, 0, func(Scenario) (int, bool) { return 0, false })
	if never.To.len() != s.len() || never.Witness != 0 {
		t.Errorf("a scenario that does not fail was changed to %d operations", never.To.len())
	}
}

// focus narrows a hand-made violation: a long prefix that leaves 19 tokens,
// then two overlapping retries of 14 both granted. It must keep the two
// retries, each on its own goroutine, after a Before that reaches the same
// state in a few operations.
func TestFocusNarrowsAViolation(t *testing.T) {
	var h model.History
	stamp := int64(0)
	at := func(client int, op model.Op, granted bool) {
		h = append(h, model.Operation{Client: client, Op: op, Granted: granted, Call: stamp + 1, Return: stamp + 2})
		stamp += 2
	}
	for range 30 {
		at(1, model.OpRetry(model.Throttled), true)
		at(2, model.OpSuccess(model.Throttled), false)
	}
	at(1, model.OpRetry(model.Throttled), true) // 20 - 5 = 15 tokens
	h = append(h,
		model.Operation{Client: 1, Op: model.OpRetry(model.Transient), Granted: true, Call: stamp + 1, Return: stamp + 4},
		model.Operation{Client: 2, Op: model.OpRetry(model.Transient), Granted: true, Call: stamp + 2, Return: stamp + 3})
	r := Check(tightTokens, h, stepsTimeout)
	if r.Verdict != Violation {
		t.Fatalf("the history is %v, want a violation", r.Verdict)
	}
	focused := focus(r, Scenario{})
	if len(focused) == 0 {
		t.Fatal("focus found nothing")
	}
	s := focused[0]
	t.Logf("focused:\n%s", s)
	if len(s.Goroutines) != 2 || len(s.Goroutines[0]) != 1 || len(s.Goroutines[1]) != 1 {
		t.Errorf("goroutines %v, want one transient retry on each of two", s.Goroutines)
	}
	state := tightTokens.Init()
	for _, op := range s.Before {
		state, _ = tightTokens.Step(state, op)
	}
	if state.Tokens != 15_000 || len(s.Before) > 3 {
		t.Errorf("Before = %v reaches %v tokens, want a short way to 15", s.Before, state.Tokens)
	}
}

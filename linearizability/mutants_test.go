package linearizability_test

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/mutants"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

var update = flag.Bool("update", false, "record the histories under testdata/histories anew")

func contains(s, sub string) bool { return strings.Contains(s, sub) }

var tightBucket = model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}

func checkThenAct(m model.TokenBucket) target[model.TokenBucketState] {
	return target[model.TokenBucketState]{m, func(budget.Clock) budget.Budget { return mutants.NewCheckThenAct(m) }, harness.Timing{}}
}

// findViolation tries scenarios from seed 1 until one is a violation.
func findViolation[S any](t *testing.T, tg target[S], limit int) (linearizability.Result[S], linearizability.Scenario) {
	t.Helper()
	for seed := range uint64(limit) {
		s := tg.scenario(seed+1, 4, 100)
		if r := tg.trial(t, s); r.Verdict == linearizability.Violation {
			t.Logf("violation at seed %d, %d operations", seed+1, len(r.History))
			return r, s
		}
	}
	t.Fatalf("no violation in %d scenarios", limit)
	panic("unreachable")
}

// The check-then-act mutant uses only atomic operations: go test -race has
// nothing to report, and this test passes under it. The linearizability
// check still finds two retries granted from a balance that pays for one,
// and Report saves it.
func TestCheckThenActIsRaceFreeButNotLinearizable(t *testing.T) {
	r, s := findViolation(t, checkThenAct(tightBucket), 5000)
	html, js, note := linearizability.Report(t, r, linearizability.Fixture{Name: t.Name(), Budget: "mutants.CheckThenAct", Rule: "linearizable", Scenario: &s})
	for _, p := range []string{html, js} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("Report's file is not where it says (%s): %v", note, err)
		}
	}
	page, _ := os.ReadFile(html)
	for _, want := range []string{"budget: mutants.CheckThenAct", "model:  model.TokenBucket", "rule:   linearizable"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the rendering does not say %q", want)
		}
	}
	f, err := linearizability.LoadFixture(js)
	if err != nil {
		t.Fatal(err)
	}
	if got := linearizability.Recheck(f, tightBucket, checkTimeout); got.Verdict != linearizability.Violation || f.Scenario == nil {
		t.Errorf("the saved history re-checks as %v (scenario saved: %v), want a violation", got.Verdict, f.Scenario != nil)
	}
	if raceEnabled {
		t.Log("built with -race: the race detector saw no race in the runs above (it would have failed this test)")
	}
}

// Minimize on a deterministic predicate: a scenario fails when two
// different goroutines each hold a transient retry. From 400 operations it
// must reach exactly two, one per goroutine, whatever the machine.
func TestMinimizeReachesTheCore(t *testing.T) {
	s := tokenBucket(smallBucket).scenario(3, 4, 100)
	fails := func(c linearizability.Scenario) (int, bool) {
		n := 0
		for _, g := range c.Goroutines {
			if slices.Contains(g, model.OpRetry(model.Transient)) {
				n++
			}
		}
		return n, n >= 2
	}
	rep := linearizability.Minimize(s, 1, 0, fails)
	if rep.To.Len() != 2 || len(rep.To.Goroutines) != 2 || rep.Witness != 2 {
		t.Fatalf("minimized to %d operations in %d goroutines (witness %d), want 2 in 2:\n%s", rep.To.Len(), len(rep.To.Goroutines), rep.Witness, rep.To)
	}
	t.Logf("from %d to %d operations in %d runs", rep.From.Len(), rep.To.Len(), rep.Runs)
	// A scenario that never fails comes back unchanged, with no witness.
	never := linearizability.Minimize(s, 3, 0, func(linearizability.Scenario) (int, bool) { return 0, false })
	if never.To.Len() != s.Len() || never.Witness != 0 {
		t.Errorf("a scenario that does not fail was changed to %d operations", never.To.Len())
	}
}

// Focus narrows a hand-made violation: a long prefix that leaves 19 tokens,
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
	r := linearizability.Check(tightBucket, h, checkTimeout)
	if r.Verdict != linearizability.Violation {
		t.Fatalf("the history is %v, want a violation", r.Verdict)
	}
	focus := linearizability.Focus(r, linearizability.Scenario{})
	if len(focus) == 0 {
		t.Fatal("Focus found nothing")
	}
	s := focus[0]
	t.Logf("focused:\n%s", s)
	if len(s.Goroutines) != 2 || len(s.Goroutines[0]) != 1 || len(s.Goroutines[1]) != 1 {
		t.Errorf("goroutines %v, want one transient retry on each of two", s.Goroutines)
	}
	state := tightBucket.Init()
	for _, op := range s.Before {
		state, _ = tightBucket.Step(state, op)
	}
	if state.Tokens != 15_000 || len(s.Before) > 3 {
		t.Errorf("Before = %v reaches %v tokens, want a short way to 15", s.Before, state.Tokens)
	}
}

// fixtureCase is a history kept under testdata/histories: how to record it
// anew with -update.
type fixtureCase struct {
	name   string
	record func(t *testing.T) linearizability.Fixture
}

func fixtureOf[S any](t *testing.T, impl string, tg target[S], want linearizability.Verdict) linearizability.Fixture {
	if want == linearizability.Violation {
		r, s := findViolation(t, tg, 5000)
		// Keep fixtures small: save the narrowed scenario's failure if it
		// shows, the whole one otherwise.
	tries:
		for _, f := range linearizability.Focus(r, s) {
			for range 20_000 {
				if fr := tg.trial(t, f); fr.Verdict == linearizability.Violation {
					r, s = fr, f
					break tries
				}
			}
		}
		return linearizability.Fixture{Budget: impl, Verdict: r.Verdict, Scenario: &s, History: r.History}
	}
	s := tg.scenario(42, 4, 25)
	r := tg.trial(t, s)
	return linearizability.Fixture{Budget: impl, Verdict: r.Verdict, Scenario: &s, History: r.History}
}

func withSpec[S any](f linearizability.Fixture, m model.Model[S]) linearizability.Fixture {
	switch v := any(m).(type) {
	case model.TokenBucket:
		f.Model.TokenBucket = &v
	case model.Ratio:
		f.Model.Ratio = &v
	case model.Throttle:
		f.Model.Throttle = &v
	}
	return f
}

func fixtureCases() []fixtureCase {
	doubleRefill := model.TokenBucket{Capacity: 5_000, TransientCost: 1_000, ThrottledCost: 1_000, RefillPerSecond: 100_000}
	return []fixtureCase{
		{"reference-tokenbucket", func(t *testing.T) linearizability.Fixture {
			return withSpec(fixtureOf(t, "budget.TokenBucket", tokenBucket(smallBucket), linearizability.Linearizable), smallBucket)
		}},
		{"reference-tokenbucket-refill", func(t *testing.T) linearizability.Fixture {
			return withSpec(fixtureOf(t, "budget.TokenBucket", tokenBucket(refillBucket), linearizability.Linearizable), refillBucket)
		}},
		{"reference-ratio", func(t *testing.T) linearizability.Fixture {
			return withSpec(fixtureOf(t, "budget.Ratio", ratio(shortRatio), linearizability.Linearizable), shortRatio)
		}},
		{"reference-throttle", func(t *testing.T) linearizability.Fixture {
			return withSpec(fixtureOf(t, "budget.Throttle", throttle(grpcThrottle), linearizability.Linearizable), grpcThrottle)
		}},
		{"mutant-checkthenact", func(t *testing.T) linearizability.Fixture {
			return withSpec(fixtureOf(t, "mutants.CheckThenAct", checkThenAct(tightBucket), linearizability.Violation), tightBucket)
		}},
		{"mutant-doublerefill", func(t *testing.T) linearizability.Fixture {
			tg := target[model.TokenBucketState]{doubleRefill, func(c budget.Clock) budget.Budget { return mutants.NewDoubleRefill(doubleRefill, c) },
				harness.Timing{Scale: 10 * time.Millisecond, Horizon: 50 * time.Millisecond}}
			return withSpec(fixtureOf(t, "mutants.DoubleRefill", tg, linearizability.Violation), doubleRefill)
		}},
	}
}

// TestSavedHistories re-checks every history under testdata/histories and
// expects the verdict it was saved with. With -update it records them anew
// first.
func TestSavedHistories(t *testing.T) {
	dir := filepath.Join("testdata", "histories")
	if *update {
		for _, c := range fixtureCases() {
			f := c.record(t)
			f.Name = c.name
			if err := f.Save(filepath.Join(dir, c.name+".json")); err != nil {
				t.Fatal(err)
			}
		}
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < len(fixtureCases()) {
		t.Fatalf("found %d saved histories, want at least %d; record them with -update", len(paths), len(fixtureCases()))
	}
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".json"), func(t *testing.T) {
			f, err := linearizability.LoadFixture(p)
			if err != nil {
				t.Fatal(err)
			}
			got, explain, err := f.Check(checkTimeout)
			if err != nil {
				t.Fatal(err)
			}
			if got != f.Verdict {
				t.Errorf("%s (%s, %d operations): verdict %v, saved as %v\n%s", p, f.Budget, len(f.History), got, f.Verdict, explain)
			}
		})
	}
}

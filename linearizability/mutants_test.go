package linearizability_test

import (
	"context"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/mutants"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

var update = flag.Bool("update", false, "record the histories under testdata/histories anew")

var tightBucket = model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}

func checkThenAct(m model.TokenBucket) linearizability.Subject[model.TokenBucketState] {
	return linearizability.Subject[model.TokenBucketState]{
		Model: m,
		New:   func(budget.Clock) budget.Budget { return mutants.NewCheckThenAct(m) },
	}
}

// findViolation tries scenarios from seed 1 until one is a violation.
func findViolation[S any](t *testing.T, sub linearizability.Subject[S], limit int) (linearizability.Result[S], linearizability.Scenario) {
	t.Helper()
	for seed := range uint64(limit) {
		s := linearizability.Generate(rand.New(rand.NewPCG(seed+1, 0)), sub.Gen)
		r, err := linearizability.Trial(context.Background(), sub, s, checkTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict == linearizability.Violation {
			t.Logf("violation at seed %d, %d operations", seed+1, len(r.History))
			return r, s
		}
	}
	t.Fatalf("no violation in %d scenarios", limit)
	panic("unreachable")
}

// The check-then-act mutant uses only atomic operations: go test -race has
// nothing to report, and this test passes under it. The linearizability
// check still finds two retries granted from a balance that pays for one.
func TestCheckThenActIsRaceFreeButNotLinearizable(t *testing.T) {
	r, _ := findViolation(t, checkThenAct(tightBucket), 2000)
	spec, _ := linearizability.Spec(r.Model())
	html := linearizability.Report(t, r, spec, "mutants.CheckThenAct", t.Name())
	if html == "" {
		t.Error("no HTML rendering was written")
	} else if _, err := os.Stat(html); err != nil {
		t.Errorf("the rendering is not where Report says: %v", err)
	}
	if raceEnabled {
		t.Log("built with -race: the race detector saw no race in the runs above (it would have failed this test)")
	} else {
		t.Log("built without -race: run go test -race to see the race detector stay silent")
	}
}

// The minimizer brings the check-then-act failure down to a handful of
// operations: two goroutines retrying at once from a bucket that pays for
// one.
func TestMinimizeCheckThenAct(t *testing.T) {
	sub := checkThenAct(tightBucket)
	_, s := findViolation(t, sub, 2000)
	// A race that needs two calls to meet within nanoseconds reproduces in
	// a small fraction of runs, less on a loaded machine, so one greedy
	// pass can stop early; a second pass from the first's result starts
	// from a much smaller scenario.
	var rep linearizability.MinimizeReport[linearizability.Result[model.TokenBucketState]]
	tries := *minimizeTries
	if tries == 0 {
		tries = 3000
		if raceEnabled {
			tries = 1000
		}
	}
	for pass := 1; pass <= 3; pass++ {
		next := linearizability.Minimize(s, tries, violation(sub))
		t.Logf("pass %d: minimized from %d to %d operations in %d runs (%v):\n%s\n%s",
			pass, next.From.Len(), next.To.Len(), next.Runs, next.Elapsed.Round(time.Millisecond), next.To, next.Witness.Explain())
		if next.Witness.Verdict != linearizability.Violation {
			break // the scenario no longer failed at all: keep the last pass
		}
		rep = next
		if rep.To.Len() <= 6 {
			break
		}
		s = rep.To
	}
	if rep.To.Len() > 6 {
		t.Errorf("minimized scenario has %d operations, want at most 6", rep.To.Len())
	}
	if rep.Witness.Verdict != linearizability.Violation {
		t.Errorf("the minimized scenario's witness is %v, want a violation", rep.Witness.Verdict)
	}
}

var minimizeTries = flag.Int("minimize-tries", 0, "runs of each candidate scenario in TestMinimizeCheckThenAct; 0 means 3000, or 1000 under -race, where runs are slower and races show more often")

// violation returns a Minimize callback: run the scenario once, and fail
// with the result when it is a violation.
func violation[S any](sub linearizability.Subject[S]) func(linearizability.Scenario) (linearizability.Result[S], bool) {
	return func(c linearizability.Scenario) (linearizability.Result[S], bool) {
		r, err := linearizability.Trial(context.Background(), sub, c, checkTimeout)
		return r, err == nil && r.Verdict == linearizability.Violation
	}
}

// fixtureCase is a history kept under testdata/histories: how to record it
// anew with -update, and the verdict it must keep.
type fixtureCase struct {
	name   string
	record func(t *testing.T) linearizability.Fixture
}

func fixtureOf[S any](t *testing.T, impl string, sub linearizability.Subject[S], want linearizability.Verdict) linearizability.Fixture {
	spec, _ := linearizability.Spec(sub.Model)
	if want == linearizability.Violation {
		_, s := findViolation(t, sub, 5000)
		// Keep fixtures small: save the minimized scenario's failure.
		rep := linearizability.Minimize(s, 200, violation(sub))
		return linearizability.Fixture{Budget: impl, Model: spec, Verdict: rep.Witness.Verdict, Scenario: &rep.To, History: rep.Witness.History}
	}
	gen := sub.Gen
	gen.Ops = 25
	s := linearizability.Generate(rand.New(rand.NewPCG(42, 0)), gen)
	r, err := linearizability.Trial(context.Background(), sub, s, checkTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return linearizability.Fixture{Budget: impl, Model: spec, Verdict: r.Verdict, Scenario: &s, History: r.History}
}

func fixtureCases() []fixtureCase {
	doubleRefill := model.TokenBucket{Capacity: 5_000, TransientCost: 1_000, ThrottledCost: 1_000, RefillPerSecond: 100_000}
	return []fixtureCase{
		{"reference-tokenbucket", func(t *testing.T) linearizability.Fixture {
			return fixtureOf(t, "budget.TokenBucket", tokenBucket(smallBucket), linearizability.Linearizable)
		}},
		{"reference-tokenbucket-refill", func(t *testing.T) linearizability.Fixture {
			return fixtureOf(t, "budget.TokenBucket", tokenBucket(refillBucket), linearizability.Linearizable)
		}},
		{"reference-ratio", func(t *testing.T) linearizability.Fixture {
			return fixtureOf(t, "budget.Ratio", ratio(shortRatio), linearizability.Linearizable)
		}},
		{"reference-throttle", func(t *testing.T) linearizability.Fixture {
			return fixtureOf(t, "budget.Throttle", throttle(grpcThrottle), linearizability.Linearizable)
		}},
		{"mutant-checkthenact", func(t *testing.T) linearizability.Fixture {
			return fixtureOf(t, "mutants.CheckThenAct", checkThenAct(tightBucket), linearizability.Violation)
		}},
		{"mutant-doublerefill", func(t *testing.T) linearizability.Fixture {
			tm := linearizability.GenConfig{Scale: 10 * time.Millisecond, Horizon: 50 * time.Millisecond}
			return fixtureOf(t, "mutants.DoubleRefill", linearizability.Subject[model.TokenBucketState]{
				Model: doubleRefill,
				New:   func(c budget.Clock) budget.Budget { return mutants.NewDoubleRefill(doubleRefill, c) },
				Gen:   tm,
			}, linearizability.Violation)
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
			got, explain, err := f.Model.Check(f.History, checkTimeout)
			if err != nil {
				t.Fatal(err)
			}
			if got != f.Verdict {
				t.Errorf("%s (%s, %d operations): verdict %v, saved as %v\n%s", p, f.Budget, len(f.History), got, f.Verdict, explain)
			}
		})
	}
}

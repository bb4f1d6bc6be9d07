package linearizability_test

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

var update = flag.Bool("update", false, "record the histories under testdata/histories anew")

func contains(s, sub string) bool { return strings.Contains(s, sub) }

var tightBucket = model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}

func checkThenAct(m model.TokenBucket) target[model.TokenBucketState] {
	return target[model.TokenBucketState]{m, func(budget.Clock) budget.Budget { return mutants.NewCheckThenAct(m) }, harness.Timing{}}
}

// fixtureCase is a history kept under testdata/histories: how to record it
// anew with -update.
type fixtureCase struct {
	name   string
	record func(t *testing.T) linearizability.Fixture
}

func fixtureOf[S any](t *testing.T, impl string, tg target[S], want linearizability.Verdict) linearizability.Fixture {
	if want == linearizability.Violation {
		// Keep fixtures small: Search narrows and minimizes the violation
		// it finds, and saves it as a fixture.
		found, err := linearizability.Search(t, linearizability.Target[S]{
			Name:      impl,
			Model:     tg.model,
			New:       func(_ *testing.T, c budget.Clock) budget.Budget { return tg.new(c) },
			Scale:     tg.timing.Scale,
			Horizon:   tg.timing.Horizon,
			Scenarios: 5000,
			Draw:      func(seed uint64) linearizability.Scenario { return tg.scenario(seed, 4, 100) },
			Timeout:   checkTimeout,
		})
		if err != nil {
			t.Fatal(err)
		}
		if found == nil || found.Verdict != linearizability.Violation {
			t.Fatalf("%s: no violation found in 5000 scenarios: %+v", impl, found)
		}
		f, err := linearizability.LoadFixture(found.JSONPath)
		if err != nil {
			t.Fatal(err)
		}
		return linearizability.Fixture{Budget: impl, Verdict: f.Verdict, Scenario: f.Scenario, History: f.History}
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

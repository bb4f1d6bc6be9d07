package budgettest_test

import (
	"errors"
	"flag"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

var minimized = regexp.MustCompile(`minimized from (\d+) to (\d+) operations`)

// The Linearizable check catches a check-then-act, narrows and minimizes
// the failing scenario, and saves it where the Failure says, as a fixture
// that re-checks against the model.
//
// The code is not instrumented here, so whether a run meets the race is up
// to the machine's scheduler: on a loaded machine 500 scenarios miss it
// about one time in five, and the check gets three attempts. (Under
// control it is caught on every run: see internal/subjects/controltest.)
func TestLinearizableExplainsCheckThenAct(t *testing.T) {
	t.Parallel()
	var err error
	for attempt := range 3 {
		err = budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{Name: "CheckThenAct", Model: bucket, Scenarios: 500,
			New: func(*testing.T, budget.Clock) budget.Budget { return mutants.NewCheckThenAct(bucket) }}, budgettest.CheckLinearizable)
		if err != nil {
			break
		}
		t.Logf("attempt %d: no run met the race", attempt+1)
	}
	var f *budgettest.Failure
	if !errors.As(err, &f) {
		t.Fatalf("VerifyCheck = %v, want a Failure", err)
	}
	t.Logf("as reported:\n%v", err)
	m := minimized.FindStringSubmatch(f.Detail)
	if f.Rule != "every concurrent history has an order, consistent with real time, that the model accepts" || m == nil {
		t.Fatalf("the failure is not an explained violation:\n%v", f)
	}
	to, _ := strconv.Atoi(m[2])
	t.Logf("minimized scenario: %s operations (from %s)", m[2], m[1])
	fx, err := linearizability.LoadFixture(f.JSONPath)
	if err != nil {
		t.Fatalf("the saved history: %v", err)
	}
	if _, err := os.Stat(f.HTMLPath); err != nil {
		t.Errorf("the rendering: %v", err)
	}
	if r := linearizability.Recheck(fx, bucket, 0); r.Verdict != linearizability.Violation || fx.Scenario == nil || operations(*fx.Scenario) != to {
		t.Errorf("the fixture re-checks as %v with a scenario of %v operations", r.Verdict, fx.Scenario)
	}
}

// generous grants every retry: a bug that shows in any order of the calls,
// so every run of a failing scenario fails again.
type generous struct{}

func (generous) Request()               {}
func (generous) Retry(budget.Kind) bool { return true }
func (generous) Success(budget.Kind)    {}

// A violation that reproduces on every run is minimized to the two retries
// that break it, whatever the number of scenarios the check is told to run:
// one runs one, and zero runs the default.
func TestLinearizableMinimizesADeterministicViolation(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1} {
		err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{Name: "generous", Model: bucket, Scenarios: n,
			New: func(*testing.T, budget.Clock) budget.Budget { return generous{} }}, budgettest.CheckLinearizable)
		var f *budgettest.Failure
		if !errors.As(err, &f) {
			t.Fatalf("Scenarios %d: VerifyCheck = %v, want a Failure", n, err)
		}
		m := minimized.FindStringSubmatch(f.Detail)
		// Under control the exhaustive stage, which runs first, finds it
		// in one of its own scenarios.
		if m == nil || !strings.Contains(f.Detail, "scenario 1 failed") && !strings.Contains(f.Detail, "found by the exhaustive stage") {
			t.Fatalf("Scenarios %d: not an explained violation of scenario 1 or of the exhaustive stage:\n%v", n, f)
		}
		from, _ := strconv.Atoi(m[1])
		to, _ := strconv.Atoi(m[2])
		if to > 3 || from <= to {
			t.Errorf("Scenarios %d: minimized from %d to %d operations, want at most 3 (two retries and a success at most):\n%v", n, from, to, f)
		}
	}
}

// The Linearizable check runs every one of its scenarios: a budget that
// goes wrong only from the fourth one it builds on (the check's probe
// builds one) is caught in a later scenario, and the failure names it.
func TestLinearizableRunsEveryScenario(t *testing.T) {
	// Not parallel: it sets a flag the other tests read.
	//
	// One run a scenario, also when the code is instrumented: the
	// schedules explored under control each build a budget too.
	f := flag.Lookup("budgettest.schedules")
	old := f.Value.String()
	f.Value.Set("0")
	defer f.Value.Set(old)
	var built atomic.Int32
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{Name: "late", Model: bucket, Scenarios: 5,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			if built.Add(1) >= 4 {
				return generous{}
			}
			return seqcheck.NewTokenBucket(bucket)(c)
		}}, budgettest.CheckLinearizable)
	if err == nil {
		t.Fatal("Linearizable passed a budget that grants everything from its fourth build on")
	}
	if strings.Contains(err.Error(), "scenario 1 failed") {
		t.Fatalf("the failure names scenario 1, which ran on a correct budget:\n%v", err)
	}
}

// operations counts what s runs: its prefix, its goroutines' lists and its
// clock steps.
func operations(s linearizability.Scenario) int {
	n := len(s.Before) + len(s.Clock)
	for _, g := range s.Goroutines {
		n += len(g)
	}
	return n
}

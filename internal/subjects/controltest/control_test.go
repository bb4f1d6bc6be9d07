package controltest_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/race"
	"github.com/retrybudget/retrybudget/internal/subjects/controltest"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

var reps = flag.Int("control.reps", defaultReps(), "seed bases of the catch test, and replays of its last failure (the acceptance level is 20)")

var bucket = model.TokenBucket{Capacity: 30_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}

func subject(name string, f func() budget.Budget) budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{Name: name, Model: bucket, Scenarios: 2,
		New: func(*testing.T, budget.Clock) budget.Budget { return f() }}
}

func setFlag(t *testing.T, name, value string) {
	t.Helper()
	old := flag.Lookup(name).Value.String()
	if err := flag.Set(name, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flag.Set(name, old) })
}

var (
	replayRE   = regexp.MustCompile(`-budgettest\.replay=(?:'([^']*)'|(\S+))`)
	switchesRE = regexp.MustCompile(`\((\d+) preemptions?(?:, shrunk from (\d+))?\)`)
)

// Under control the check-then-act is caught on every seed base, in its
// first scenario, and minimized deterministically to at most four
// operations; the replay the failure prints fails again every time.
func TestControlledLinearizableCatchesCheckThenAct(t *testing.T) {
	catchAndReplay(t, subject("CheckThenAct", func() budget.Budget { return controltest.NewCheckThenAct(bucket) }), 4, *reps)
}

// The same for a race between two goroutines the budget starts itself,
// which serve every call: they are scheduled too. Its witness needs three
// retries, and every call is a dozen yield points, so the minimizer's
// deterministic search stops at a larger scenario than for a
// check-then-act in the caller's goroutine: up to 16 operations in 20 seed
// bases. Its runs are slower too, so it gets fewer seed bases by default.
func TestControlledLinearizableCatchesARaceBetweenTheBudgetsGoroutines(t *testing.T) {
	skipUnderRace(t)
	catchAndReplay(t, subject("Pool", func() budget.Budget { return controltest.NewPool(bucket, 2, true) }), 16, max(1, *reps/5))
}

// catchAndReplay checks that ct fails the Linearizable check on each of
// reps seed bases with a witness of at most maxOps operations, and that
// the last failure's replay fails every time.
func catchAndReplay(t *testing.T, ct budgettest.Subject[model.TokenBucketState], maxOps, reps int) {
	t.Helper()
	var replay string
	for base := range reps {
		setFlag(t, "budgettest.seed", fmt.Sprint(base+1))
		err := budgettest.VerifyCheck(t, ct, budgettest.CheckLinearizable)
		var f *budgettest.Failure
		if !errors.As(err, &f) {
			t.Fatalf("seed base %d: VerifyCheck = %v, want a Failure", base+1, err)
		}
		m := replayRE.FindStringSubmatch(f.Error())
		if m == nil {
			t.Fatalf("seed base %d: no replay command in:\n%v", base+1, f)
		}
		// The scenario itself, or the file saved with it when it is long.
		var s linearizability.Scenario
		if m[1] != "" {
			if err := json.Unmarshal([]byte(m[1]), &s); err != nil {
				t.Fatalf("seed base %d: the replay does not parse: %v", base+1, err)
			}
		} else {
			fx, err := linearizability.LoadFixture(m[2])
			if err != nil || fx.Scenario == nil {
				t.Fatalf("seed base %d: the replay file %s does not load: %v", base+1, m[2], err)
			}
			s = *fx.Scenario
		}
		if operations(s) > maxOps || s.Control == nil || len(s.Control.Schedule) == 0 {
			t.Errorf("seed base %d: minimized to %d operations (want at most %d):\n%v", base+1, operations(s), maxOps, f)
		}
		if sw := switchesRE.FindStringSubmatch(f.Error()); sw == nil {
			t.Errorf("seed base %d: the failure does not count its preemptions:\n%v", base+1, f)
		} else {
			t.Logf("seed base %d: %d operations, %s preemptions (shrunk from %q)", base+1, operations(s), sw[1], sw[2])
		}
		replay = m[1] + m[2]
	}
	setFlag(t, "budgettest.replay", replay)
	for i := range reps {
		if err := budgettest.VerifyCheck(t, ct, budgettest.CheckLinearizable); err == nil {
			t.Fatalf("replay %d of %s passed", i+1, replay)
		}
	}
}

// Correct budgets pass under control on every seed base.
func TestControlledLinearizablePassesCorrectBudgets(t *testing.T) {
	skipUnderRace(t)
	for base := range *reps {
		setFlag(t, "budgettest.seed", fmt.Sprint(base+1))
		for _, sub := range []budgettest.Subject[model.TokenBucketState]{
			subject("CAS", func() budget.Budget { return controltest.NewCAS(bucket) }),
			subject("Locked", func() budget.Budget { return controltest.NewLocked(bucket) }),
		} {
			if err := budgettest.VerifyCheck(t, sub, budgettest.CheckLinearizable); err != nil {
				t.Fatalf("seed base %d: %s: %v", base+1, sub.Name, err)
			}
		}
	}
}

// Budgets served by goroutines of their own pass too: one worker, whose
// check-then-act nothing can interleave, and three whose grants are
// compare-and-swaps. Their runs are slower, so they get fewer seed bases.
func TestControlledLinearizablePassesCorrectPools(t *testing.T) {
	skipUnderRace(t)
	for base := range max(1, *reps/5) {
		setFlag(t, "budgettest.seed", fmt.Sprint(base+1))
		for _, sub := range []budgettest.Subject[model.TokenBucketState]{
			subject("PoolOfOne", func() budget.Budget { return controltest.NewPool(bucket, 1, true) }),
			subject("PoolOfCAS", func() budget.Budget { return controltest.NewPool(bucket, 3, false) }),
		} {
			if err := budgettest.VerifyCheck(t, sub, budgettest.CheckLinearizable); err != nil {
				t.Fatalf("seed base %d: %s: %v", base+1, sub.Name, err)
			}
		}
	}
}

// The Invariant check explores its stress runs under control too: the
// check-then-act grants what the balance does not allow in a controlled
// run, so the failure names its schedule, on every seed base; correct
// budgets pass, on a fifth of the seed bases.
func TestControlledInvariant(t *testing.T) {
	skipUnderRace(t)
	ct := subject("CheckThenAct", func() budget.Budget { return controltest.NewCheckThenAct(bucket) })
	for base := range *reps {
		setFlag(t, "budgettest.seed", fmt.Sprint(base+1))
		err := budgettest.VerifyCheck(t, ct, budgettest.CheckInvariant)
		var f *budgettest.Failure
		if !errors.As(err, &f) || !strings.Contains(f.Error(), "under the controlled schedule") {
			t.Fatalf("seed base %d: VerifyCheck = %v, want a Failure of a controlled run", base+1, err)
		}
		if base >= max(1, *reps/5) {
			continue // the correct budgets' runs are the slow ones
		}
		for _, sub := range []budgettest.Subject[model.TokenBucketState]{
			subject("CAS", func() budget.Budget { return controltest.NewCAS(bucket) }),
			subject("Locked", func() budget.Budget { return controltest.NewLocked(bucket) }),
		} {
			if err := budgettest.VerifyCheck(t, sub, budgettest.CheckInvariant); err != nil {
				t.Fatalf("seed base %d: %s: %v", base+1, sub.Name, err)
			}
		}
	}
}

// skipUnderRace skips a test of controlled runs under the race detector:
// this package's budgets call the yield hooks themselves, so their
// controlled runs are made in this process, where the race detector sees
// no race (every switch is a synchronization) and makes each run five to
// ten times slower. go test ./... without -race (CI runs both) keeps
// their verdicts; TestControlledLinearizableCatchesCheckThenAct still runs
// under -race.
// defaultReps is -control.reps's default: 5, or 2 under -race.
func defaultReps() int {
	if race.Enabled {
		return 2
	}
	return 5
}

func skipUnderRace(t *testing.T) {
	t.Helper()
	if race.Enabled {
		t.Skip("controlled runs in this process: the race detector sees no race in them; checked by go test ./... without -race")
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

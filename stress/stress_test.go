package stress_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/mutants"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/stress"
)

// Budgets small enough that 64 goroutines meet at their boundaries.
var (
	bucket       = model.TokenBucket{Capacity: 50_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	refillBucket = model.TokenBucket{Capacity: 30_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 10_000}
	window       = model.Ratio{PPM: 100_000, Window: 10 * time.Second, Slots: 10, Floor: 3}
	throttle     = model.Throttle{Max: 10_000, Ratio: 500}
)

const goroutines = 64

func run(t *testing.T, seed uint64, step time.Duration, newBudget func(budget.Clock) budget.Budget) *stress.Run {
	t.Helper()
	r, err := stress.Stress(context.Background(), stress.Config{Goroutines: goroutines, Ops: 50, ClockStep: step, Seed: seed}, newBudget)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var stressRuns = flag.Int("stress-runs", 5, "stress runs of each reference budget")

func TestReferenceBudgetsHoldTheirInvariants(t *testing.T) {
	runs := *stressRuns
	for seed := range uint64(runs) {
		if err := run(t, seed, 0, seqcheck.NewTokenBucket(bucket)).CheckTokenBucket(bucket); err != nil {
			t.Errorf("TokenBucket, seed %d: %v", seed, err)
		}
		if err := run(t, seed, 700*time.Millisecond, seqcheck.NewTokenBucket(refillBucket)).CheckTokenBucket(refillBucket); err != nil {
			t.Errorf("TokenBucket with refill, seed %d: %v", seed, err)
		}
		if err := run(t, seed, 3*time.Second, seqcheck.NewRatio(window)).CheckRatio(window); err != nil {
			t.Errorf("Ratio, seed %d: %v", seed, err)
		}
		if err := run(t, seed, 0, seqcheck.NewThrottle(throttle)).CheckThrottle(throttle); err != nil {
			t.Errorf("Throttle, seed %d: %v", seed, err)
		}
	}
	t.Logf("%d runs each of %d goroutines × 50 calls × 17 phases on every reference budget: invariants held", runs, goroutines)
}

// catch runs stress on a mutant until an invariant breaks, for at most n
// runs, and returns the violation.
func catch(t *testing.T, n int, newBudget func(budget.Clock) budget.Budget, check func(*stress.Run) error) error {
	t.Helper()
	start := time.Now()
	for seed := range uint64(n) {
		if err := check(run(t, seed, 0, newBudget)); err != nil {
			t.Logf("caught in run %d after %v:\n%v", seed+1, time.Since(start).Round(time.Millisecond), err)
			return err
		}
	}
	t.Errorf("no invariant broke in %d runs", n)
	return nil
}

// The check-then-act mutant is race-free: only the invariant sees it.
func TestInvariantCatchesCheckThenAct(t *testing.T) {
	tight := model.TokenBucket{Capacity: 3_000, TransientCost: 1_000, ThrottledCost: 1_000}
	err := catch(t, 300, func(budget.Clock) budget.Budget { return mutants.NewCheckThenAct(tight) },
		func(r *stress.Run) error { return r.CheckTokenBucket(tight) })
	var v *stress.Violation
	if err != nil && !errors.As(err, &v) {
		t.Errorf("error %v is not a *Violation", err)
	}
}

func TestInvariantCatchesThresholdOffByOne(t *testing.T) {
	catch(t, 5, func(budget.Clock) budget.Budget { return mutants.NewThresholdOffByOne(throttle) },
		func(r *stress.Run) error { return r.CheckThrottle(throttle) })
}

func TestInvariantCatchesFloorAdded(t *testing.T) {
	catch(t, 5, func(c budget.Clock) budget.Budget { return mutants.NewFloorAdded(window, c) },
		func(r *stress.Run) error { return r.CheckRatio(window) })
}

// The missing-lock mutant runs in a child process, where the race detector
// (in a -race build) or the invariant can fail it without failing this test.
func TestMissingLockChild(t *testing.T) {
	if os.Getenv("RETRYBUDGET_STRESS_CHILD") != "missinglock" {
		t.Skip("runs only as a child of TestRaceDetectorCatchesMissingLock")
	}
	tight := model.TokenBucket{Capacity: 3_000, TransientCost: 1_000, ThrottledCost: 1_000}
	for seed := range uint64(20) {
		if err := run(t, seed, 0, func(budget.Clock) budget.Budget { return mutants.NewMissingLock(tight) }).CheckTokenBucket(tight); err != nil {
			t.Fatalf("invariant: %v", err)
		}
	}
}

func TestRaceDetectorCatchesMissingLock(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestMissingLockChild$", "-test.count=1", "-test.v")
	cmd.Env = append(stress.ChildEnv(), "RETRYBUDGET_STRESS_CHILD=missinglock")
	out, err := cmd.CombinedOutput()
	text := string(out)
	switch {
	case strings.Contains(text, "WARNING: DATA RACE"):
		t.Log("the race detector reported the missing lock")
	case !raceEnabled && err != nil && strings.Contains(text, "stress: token bucket"):
		t.Log("built without -race: the invariant caught a lost update instead; run with -race to see the detector")
	case !raceEnabled:
		t.Skip("built without -race, and no lost update showed; run with -race")
	default:
		t.Errorf("the missing-lock mutant escaped -race (exit %v):\n%s", err, text)
	}
}

// deadlocked is a budget whose Retry never returns once two goroutines meet
// in it.
type deadlocked struct{ a, b sync.Mutex }

func (d *deadlocked) Request() {}
func (d *deadlocked) Retry(budget.Kind) bool {
	d.a.Lock()
	d.b.Lock() // never unlocked
	return true
}
func (d *deadlocked) Success(budget.Kind) {}

func TestWatchdogReportsADeadlock(t *testing.T) {
	_, err := stress.Stress(context.Background(), stress.Config{Goroutines: 4, Ops: 10, Timeout: 500 * time.Millisecond},
		func(budget.Clock) budget.Budget { return &deadlocked{} })
	if !errors.Is(err, stress.ErrDeadlock) || !strings.Contains(err.Error(), "(*deadlocked).Retry") {
		t.Fatalf("Stress on a deadlocking budget = %v, want ErrDeadlock naming the stuck call", err)
	}
}

func TestPanickingBudgetIsAnError(t *testing.T) {
	_, err := stress.Stress(context.Background(), stress.Config{Goroutines: 4, Ops: 10},
		func(budget.Clock) budget.Budget { return panicky{} })
	if err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("Stress on a panicking budget = %v, want an error", err)
	}
}

type panicky struct{}

func (panicky) Request()               {}
func (panicky) Retry(budget.Kind) bool { panic("boom") }
func (panicky) Success(budget.Kind)    {}

package stressrun_test

import (
	"errors"
	"flag"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/race"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/internal/stressrun"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/model"
)

// Budgets small enough that 64 goroutines meet at their boundaries.
var (
	bucket       = model.TokenBucket{Capacity: 50_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	refillBucket = model.TokenBucket{Capacity: 30_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 10_000}
	window       = model.Ratio{PPM: 100_000, Window: 10 * time.Second, Slots: 10, Floor: 3}
	throttle     = model.Throttle{Max: 10_000, Ratio: 500}
)

const goroutines = 64

func subject(newBudget func(budget.Clock) budget.Budget) harness.Subject[struct{}] {
	return harness.Subject[struct{}]{Name: "test", New: newBudget}
}

func run(t *testing.T, seed uint64, step time.Duration, newBudget func(budget.Clock) budget.Budget) *stressrun.Run {
	t.Helper()
	r, err := stressrun.Stress(stressrun.Config{Goroutines: goroutines, Ops: 50, ClockStep: step, Seed: seed}, subject(newBudget))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var stressRuns = flag.Int("stress.runs", 5, "stress runs of each reference budget (1 under -race unless set)")

func TestReferenceBudgetsHoldTheirInvariants(t *testing.T) {
	t.Parallel()
	runs := *stressRuns
	if race.Enabled && !flagSet("stress.runs") {
		// One run of each under the detector, five to ten times slower,
		// sees the budgets' races; the five runs are go test ./...'s.
		runs = 1
	}
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
func catch(t *testing.T, n int, newBudget func(budget.Clock) budget.Budget, check func(*stressrun.Run) error) error {
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

// The check-then-act mutant is race-free: only the invariant sees it. Its
// window is a few instructions, which without -race and with the cores
// busy one run in about 130 shows (the test missed it in 300 runs once in
// ten with two CPU-burning loops beside it): it stops at the first catch,
// and gives up after 2,000, which at that rate misses once in millions.
func TestInvariantCatchesCheckThenAct(t *testing.T) {
	t.Parallel()
	tight := model.TokenBucket{Capacity: 3_000, TransientCost: 1_000, ThrottledCost: 1_000}
	err := catch(t, 2000, func(budget.Clock) budget.Budget { return mutants.NewCheckThenAct(tight) },
		func(r *stressrun.Run) error { return r.CheckTokenBucket(tight) })
	var v *stressrun.Violation
	if err != nil && !errors.As(err, &v) {
		t.Errorf("error %v is not a *Violation", err)
	}
}

func TestInvariantCatchesThresholdOffByOne(t *testing.T) {
	t.Parallel()
	catch(t, 5, func(budget.Clock) budget.Budget { return mutants.NewThresholdOffByOne(throttle) },
		func(r *stressrun.Run) error { return r.CheckThrottle(throttle) })
}

func TestInvariantCatchesFloorAdded(t *testing.T) {
	t.Parallel()
	catch(t, 5, func(c budget.Clock) budget.Budget { return mutants.NewFloorAdded(window, c) },
		func(r *stressrun.Run) error { return r.CheckRatio(window) })
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
	t.Parallel()
	_, err := stressrun.Stress(stressrun.Config{Goroutines: 4, Ops: 10, Timeout: 500 * time.Millisecond},
		subject(func(budget.Clock) budget.Budget { return &deadlocked{} }))
	var f *harness.Fault
	if !errors.As(err, &f) || f.Cause != harness.Stuck || !strings.Contains(err.Error(), "(*deadlocked).Retry") {
		t.Fatalf("Stress on a deadlocking budget = %v, want a Stuck fault naming the stuck call", err)
	}
}

// slowBudget is a correct budget that is slow under contention: each call
// holds one lock for a millisecond.
type slowBudget struct {
	mu     sync.Mutex
	tokens int
}

func (b *slowBudget) Request() {}
func (b *slowBudget) Retry(budget.Kind) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	time.Sleep(time.Millisecond)
	if b.tokens == 0 {
		return false
	}
	b.tokens--
	return true
}
func (b *slowBudget) Success(budget.Kind) {}

// A correct budget too slow to finish the run within Config.Within gives
// a run cut short, with the calls it made, and no fault: slow is not
// stuck. A deadlock still reaches Timeout (TestWatchdogReportsADeadlock).
func TestSlowBudgetIsCutShortNotStuck(t *testing.T) {
	t.Parallel()
	start := time.Now()
	run, err := stressrun.Stress(stressrun.Config{Goroutines: 16, Ops: 200, Timeout: 20 * time.Second, Within: 200 * time.Millisecond},
		subject(func(budget.Clock) budget.Budget { return &slowBudget{tokens: 1 << 30} }))
	if err != nil {
		t.Fatalf("Stress on a slow budget: %v", err)
	}
	// 16 × 200 calls in each of the phases, a millisecond each, one at a
	// time, would take nearly a minute.
	if !run.CutShort || len(run.Entries) == 0 || len(run.Entries) >= 16*200 {
		t.Fatalf("Stress on a slow budget: cut short %v with %d calls, want cut short with some calls", run.CutShort, len(run.Entries))
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("Stress on a slow budget took %v past its Within of 200ms", d)
	}
	if got := len(run.Clock); got != 1 {
		t.Errorf("the run cut short in its first phase has %d phases' clocks, want 1", got)
	}
}

func TestPanickingBudgetIsAnError(t *testing.T) {
	t.Parallel()
	_, err := stressrun.Stress(stressrun.Config{Goroutines: 4, Ops: 10},
		subject(func(budget.Clock) budget.Budget { return panicky{} }))
	var f *harness.Fault
	if !errors.As(err, &f) || f.Cause != harness.MethodPanicked || f.Method != "Retry" || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Stress on a panicking budget = %v, want a fault naming Retry and the panic", err)
	}
}

type panicky struct{}

func (panicky) Request()               {}
func (panicky) Retry(budget.Kind) bool { panic("boom") }
func (panicky) Success(budget.Kind)    {}

// lostUpdateThrottle is gRPC retry throttling that guards its count with
// two locks, one for retries and one for successes, and yields inside each:
// calls of one kind are serialized, but a retry and a success overwrite
// each other's update. No data race is reported (every access is atomic),
// and no burst or duel of one call shows it.
type lostUpdateThrottle struct {
	m         model.Throttle
	retryMu   sync.Mutex
	successMu sync.Mutex
	milli     atomic.Int64
}

func newLostUpdateThrottle(m model.Throttle) *lostUpdateThrottle {
	t := &lostUpdateThrottle{m: m}
	t.milli.Store(m.Max)
	return t
}

func (t *lostUpdateThrottle) update(mu *sync.Mutex, f func(int64) int64) int64 {
	mu.Lock() // BUG: the other kind of call holds the other lock
	defer mu.Unlock()
	old := t.milli.Load()
	runtime.Gosched()
	n := f(old)
	t.milli.Store(n)
	return n
}
func (t *lostUpdateThrottle) Request() {}
func (t *lostUpdateThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	return 2*t.update(&t.retryMu, func(v int64) int64 { return max(v-1000, 0) }) > t.m.Max
}
func (t *lostUpdateThrottle) Success(budget.Kind) {
	t.update(&t.successMu, func(v int64) int64 { return min(v+t.m.Ratio, t.m.Max) })
}
func (t *lostUpdateThrottle) Available() float64 { return float64(t.milli.Load()) / 1000 }

// The bursts' churn finds a lost update: many goroutines retrying and
// crediting the throttle back, which in any order ends where it started,
// end elsewhere. The reference throttle passes the same runs.
func TestBurstsChurnFindsALostUpdate(t *testing.T) {
	t.Parallel()
	grpc := model.Throttle{Max: 10_000, Ratio: 100}
	for seed := range uint64(3) {
		sub := harness.Subject[model.ThrottleState]{Name: "lost update", Model: grpc,
			New: func(budget.Clock) budget.Budget { return newLostUpdateThrottle(grpc) }}
		err := stressrun.Bursts(stressrun.BurstConfig{Seed: seed + 1}, sub)
		var m *stressrun.Mismatch
		if !errors.As(err, &m) || len(m.History) == 0 || !strings.HasPrefix(m.History[len(m.History)-1], "a churn: ") {
			t.Fatalf("seed %d: Bursts = %v, want a mismatch right after a churn", seed+1, err)
		}
		sub.New = seqcheck.NewThrottle(grpc)
		if err := stressrun.Bursts(stressrun.BurstConfig{Seed: seed + 1}, sub); err != nil {
			t.Fatalf("seed %d: the reference throttle: %v", seed+1, err)
		}
	}
}

// slowly makes every call of a budget hold one lock for a while: still
// linearizable, and as slow under contention as a spin lock on busy cores.
type slowly struct {
	mu sync.Mutex
	b  budget.Budget
}

func (s *slowly) do(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	time.Sleep(50 * time.Microsecond)
	f()
}
func (s *slowly) Request() { s.do(s.b.Request) }
func (s *slowly) Retry(k budget.Kind) (ok bool) {
	s.do(func() { ok = s.b.Retry(k) })
	return ok
}
func (s *slowly) Success(k budget.Kind) { s.do(func() { s.b.Success(k) }) }
func (s *slowly) Available() float64 {
	var a float64
	s.do(func() { a = s.b.(stressrun.Balancer).Available() })
	return a
}

// A burst run stopped by Config.Stop checks the bursts on the calls they
// made, and starts no round after: a correct budget too slow to finish
// passes, cut short; one that parts from its model is still caught in the
// calls made.
func TestBurstsStopped(t *testing.T) {
	t.Parallel()
	small := model.Throttle{Max: 10, Ratio: 100}
	for _, broken := range []bool{false, true} {
		sub := harness.Subject[model.ThrottleState]{Name: "slow", Model: small, New: func(budget.Clock) budget.Budget {
			if broken {
				return &slowly{b: seqcheck.NewThrottle(model.Throttle{Max: 12, Ratio: 100})(nil)}
			}
			return &slowly{b: seqcheck.NewThrottle(small)(nil)}
		}}
		var stop atomic.Bool
		timer := time.AfterFunc(300*time.Millisecond, func() { stop.Store(true) })
		start := time.Now()
		cut, err := stressrun.BurstsCut(stressrun.BurstConfig{Seed: 1, Stop: &stop}, sub)
		timer.Stop()
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("broken %v: the run took %v after a stop at 300ms", broken, d)
		}
		if !broken && (err != nil || !cut) {
			t.Errorf("a slow correct throttle: Bursts = cut %v, %v; want cut short, no error", cut, err)
		}
		var m *stressrun.Mismatch
		if broken && !errors.As(err, &m) {
			t.Errorf("a slow throttle of another maximum: Bursts = cut %v, %v; want a mismatch", cut, err)
		}
	}
}

// flagSet reports whether the flag name was set on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

package budgettest_test

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
)

// Bad subjects: each gives failures of its own rule, and the test binary
// neither crashes nor hangs.

// panicky is a correct token bucket that panics in the method named by in.
type panicky struct {
	in string
	budget.Budget
}

func newPanicky(in string) panicky {
	return panicky{in, seqcheck.NewTokenBucket(bucket)(nil)}
}

func (p panicky) Retry(k budget.Kind) bool {
	if p.in == "Retry" {
		panic("retry exploded")
	}
	return p.Budget.Retry(k)
}
func (p panicky) Success(k budget.Kind) {
	if p.in == "Success" {
		panic("success exploded")
	}
	p.Budget.Success(k)
}

func TestBadSubjects(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	good := adapt(seqcheck.NewTokenBucket(bucket))
	t.Run("RetryPanics", func(t *testing.T) {
		fs := expect(t, budgettest.Subject[model.TokenBucketState]{Name: "panics in Retry", Model: bucket,
			New: func(*testing.T, budget.Clock) budget.Budget { return newPanicky("Retry") }},
			"no budget method panics", "Retry panicked on retry(", "retry exploded")
		if len(fs) < 5 {
			t.Errorf("%d checks failed, want every check that calls Retry", len(fs))
		}
	})
	t.Run("SuccessPanics", func(t *testing.T) {
		expect(t, budgettest.Subject[model.TokenBucketState]{Name: "panics in Success", Model: bucket,
			New: func(*testing.T, budget.Clock) budget.Budget { return newPanicky("Success") }},
			"no budget method panics", "Success panicked on success(", "success exploded")
	})
	t.Run("FactoryPanics", func(t *testing.T) {
		fs := expect(t, budgettest.Subject[model.TokenBucketState]{Name: "panicky factory", Model: bucket,
			New: func(*testing.T, budget.Clock) budget.Budget { panic("no config") }},
			"the factory builds a budget without panicking", "the factory panicked: no config")
		if len(fs) != 1 {
			t.Errorf("%d failures, want 1: a broken factory is reported once", len(fs))
		}
	})
	t.Run("FactoryReturnsNil", func(t *testing.T) {
		expect(t, budgettest.Subject[model.TokenBucketState]{Name: "nil", Model: bucket,
			New: func(*testing.T, budget.Clock) budget.Budget { return nil }},
			"the factory returns a non-nil budget")
	})
	t.Run("NilModel", func(t *testing.T) {
		expect(t, budgettest.Subject[model.TokenBucketState]{Name: "no model", New: good},
			"the subject describes a budget the suite can check", "Subject.Model is nil")
	})
	t.Run("ZeroRatioModel", func(t *testing.T) {
		expect(t, budgettest.Subject[model.RatioState]{Name: "zero ratio", Model: model.Ratio{}, New: adapt(seqcheck.NewRatio(window)), Scale: time.Second},
			"the subject describes", "Ratio.PPM must be in [1, 1000000], got 0")
	})
	t.Run("NegativeScale", func(t *testing.T) {
		expect(t, budgettest.Subject[model.TokenBucketState]{Name: "negative scale", Model: bucket, New: good, Scale: -time.Second},
			"the subject describes", "Subject.Scale is -1s")
	})
	t.Run("NegativeHorizon", func(t *testing.T) {
		expect(t, budgettest.Subject[model.TokenBucketState]{Name: "negative horizon", Model: bucket, New: good, Scale: time.Second, Horizon: -1},
			"the subject describes", "Subject.Horizon is -1ns")
	})
	t.Run("HugeScale", func(t *testing.T) {
		expect(t, budgettest.Subject[model.TokenBucketState]{Name: "huge scale", Model: bucket, New: good, Scale: math.MaxInt64},
			"the subject describes", "Subject.Scale is 2562047h47m16.854775807s, above")
	})
	t.Run("ScaleAboveHorizon", func(t *testing.T) {
		expect(t, budgettest.Subject[model.TokenBucketState]{Name: "scale above horizon", Model: bucket, New: good, Scale: time.Hour, Horizon: time.Second},
			"the subject describes", "Subject.Scale (1h0m0s) is above Subject.Horizon (1s)")
	})
	t.Run("WallClockHorizonTooLong", func(t *testing.T) {
		expect(t, budgettest.Subject[model.TokenBucketState]{Name: "a month on the wall clock", Model: bucket, New: good, WallClock: true, Scale: time.Hour, Horizon: 30 * 24 * time.Hour},
			"the subject describes", "the longest step a wall-clock subject may take")
	})
	t.Run("Deadlocks", func(t *testing.T) {
		start := time.Now()
		expect(t, budgettest.Subject[model.TokenBucketState]{Name: "deadlocked", Model: bucket,
			New: func(*testing.T, budget.Clock) budget.Budget { return &deadlocked{} }, Watchdog: 300 * time.Millisecond},
			"every call returns: the budget neither deadlocks nor livelocks", "(*deadlocked).Retry")
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("the suite took %v to give up on a deadlocked budget", d)
		}
	})
	t.Run("ModelNotDeterministic", func(t *testing.T) {
		err := budgettest.VerifyCheck(t, budgettest.Subject[model.ThrottleState]{Name: "flaky model", Model: &flakyModel{},
			New: adapt(seqcheck.NewThrottle(grpc))}, budgettest.CheckModel)
		if err == nil || !contains(err.Error(), "the model is deterministic") {
			t.Errorf("VerifyCheck(Model) = %v, want the model rule", err)
		}
	})
	t.Run("ModelPanics", func(t *testing.T) {
		err := budgettest.VerifyCheck(t, budgettest.Subject[model.ThrottleState]{Name: "panicking model", Model: panickyModel{},
			New: adapt(seqcheck.NewThrottle(grpc))}, budgettest.CheckModel)
		if err == nil || !contains(err.Error(), "the model panicked: step exploded") {
			t.Errorf("VerifyCheck(Model) = %v, want the model's panic", err)
		}
	})
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// deadlocked's Retry takes its lock twice, and never returns.
type deadlocked struct{ mu sync.Mutex }

func (d *deadlocked) Request() {}
func (d *deadlocked) Retry(budget.Kind) bool {
	d.mu.Lock()
	d.mu.Lock()
	return true
}
func (d *deadlocked) Success(budget.Kind) {}

// flakyModel answers differently on every other call.
type flakyModel struct {
	mu sync.Mutex
	n  int
}

func (f *flakyModel) Init() model.ThrottleState { return model.ThrottleState{Tokens: 10_000} }
func (f *flakyModel) Step(s model.ThrottleState, op model.Op) (model.ThrottleState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return s, f.n%2 == 0
}
func (f *flakyModel) Equal(a, b model.ThrottleState) bool        { return a == b }
func (f *flakyModel) Hash(s model.ThrottleState) uint64          { return uint64(s.Tokens) }
func (f *flakyModel) DescribeState(s model.ThrottleState) string { return "flaky" }

// panickyModel panics on its tenth retry.
type panickyModel struct{}

func (panickyModel) Init() model.ThrottleState { return model.ThrottleState{} }
func (panickyModel) Step(s model.ThrottleState, op model.Op) (model.ThrottleState, bool) {
	if op.Op == model.Retry {
		if s.Tokens++; s.Tokens == 10 {
			panic("step exploded")
		}
	}
	return s, false
}
func (panickyModel) Equal(a, b model.ThrottleState) bool        { return a == b }
func (panickyModel) Hash(s model.ThrottleState) uint64          { return uint64(s.Tokens) }
func (panickyModel) DescribeState(s model.ThrottleState) string { return "n" }

// t.Fatal in the factory fails the t it was given, so the case runs in a
// child process: the parent reads that the child reported the Failure and
// ended as a failed test, not a crash.
func TestFactoryCallsFatal(t *testing.T) {
	t.Parallel()
	if os.Getenv("RETRYBUDGET_FATAL_FACTORY") != "" {
		err := budgettest.Verify(t, budgettest.Subject[model.TokenBucketState]{Name: "fatal factory", Model: bucket,
			New: func(t *testing.T, _ budget.Clock) budget.Budget { t.Fatal("cannot connect"); return nil }})
		fs := failures(t, err)
		if len(fs) == 1 && strings.Contains(fs[0].Rule, "does not call t.Fatal") {
			fmt.Println("REPORTED:", fs[0].Rule)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFactoryCallsFatal$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "RETRYBUDGET_FATAL_FACTORY=1")
	out, err := cmd.CombinedOutput()
	text := string(out)
	switch {
	case strings.Contains(text, "panic:") || strings.Contains(text, "fatal error"):
		t.Fatalf("the child crashed:\n%s", text)
	case !strings.Contains(text, "REPORTED: the factory returns a budget: it does not call t.Fatal"):
		t.Fatalf("the child did not report the factory's t.Fatal as its own Failure:\n%s", text)
	case err == nil || !strings.Contains(text, "--- FAIL: TestFactoryCallsFatal"):
		t.Fatalf("the child's test did not fail, though its factory called t.Fatal (exit %v):\n%s", err, text)
	}
	t.Log("the child reported the factory's t.Fatal as one Failure and failed its test")
}

// A panic in the Sequential check is reported with the sequence rapid shrank
// it to.
func TestSequentialPanicShowsTheShrunkSequence(t *testing.T) {
	t.Parallel()
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{Name: "panics in Retry", Model: bucket,
		New: func(*testing.T, budget.Clock) budget.Budget { return newPanicky("Retry") }}, budgettest.CheckSequential)
	if err == nil || !contains(err.Error(), "Retry panicked") || !contains(err.Error(), "rapid's shrunk sequence, history:\n") {
		t.Fatalf("VerifyCheck(Sequential) = %v, want the panic and rapid's shrunk history", err)
	}
}

// The Model check names the step at which the model first answered two
// ways: flakyModel does on its first.
func TestModelCheckNamesTheStep(t *testing.T) {
	t.Parallel()
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.ThrottleState]{Name: "flaky model", Model: &flakyModel{},
		New: adapt(seqcheck.NewThrottle(grpc))}, budgettest.CheckModel)
	if err == nil || !contains(err.Error(), ": step 1, ") {
		t.Fatalf("VerifyCheck(Model) = %v, want the failure at step 1", err)
	}
}

// boundaryModel's clock is its state, and it answers two ways only when a
// step brings the clock onto a multiple of scale from off one: the Model
// check finds it only if it steps to the slot boundaries of the instant it
// has reached, not of instant 0.
type boundaryModel struct {
	scale time.Duration
	mu    sync.Mutex
	n     int
}

func (m *boundaryModel) Init() time.Duration { return 0 }
func (m *boundaryModel) Step(s time.Duration, op model.Op) (time.Duration, bool) {
	if op.Op != model.Advance {
		return s, false
	}
	next := s + op.D
	if s%m.scale != 0 && next%m.scale == 0 {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.n++
		return next + time.Duration(m.n%2), false
	}
	return next, false
}
func (m *boundaryModel) Equal(a, b time.Duration) bool        { return a == b }
func (m *boundaryModel) Hash(s time.Duration) uint64          { return uint64(s) }
func (m *boundaryModel) DescribeState(s time.Duration) string { return s.String() }

func TestModelCheckStepsToBoundariesOfNow(t *testing.T) {
	t.Parallel()
	scale := 1_000_003 * time.Nanosecond // a prime: no other step lands on its multiples
	err := budgettest.VerifyCheck(t, budgettest.Subject[time.Duration]{Name: "boundary model", Model: &boundaryModel{scale: scale},
		Scale: scale, Horizon: 10 * scale, New: adapt(seqcheck.NewThrottle(grpc))}, budgettest.CheckModel)
	if err == nil || !contains(err.Error(), "the model is deterministic") {
		t.Fatalf("VerifyCheck(Model) = %v, want the model rule", err)
	}
}

// The Amplification check fails a budget that grants more retries under a
// total outage than the model does, and reports a model that panics in the
// simulation as the model's fault, not the budget's.
func TestAmplificationCheck(t *testing.T) {
	t.Parallel()
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{Name: "generous", Model: bucket,
		New: func(*testing.T, budget.Clock) budget.Budget { return generous{} }}, budgettest.CheckAmplification)
	if err == nil || !contains(err.Error(), "under a 100% outage the budgets granted") {
		t.Errorf("VerifyCheck(Amplification) on a budget that grants every retry = %v, want the amplification rule", err)
	}
	err = budgettest.VerifyCheck(t, budgettest.Subject[model.ThrottleState]{Name: "panicking model", Model: panickyModel{},
		New: adapt(seqcheck.NewThrottle(grpc))}, budgettest.CheckAmplification)
	if err == nil || !contains(err.Error(), "the model, stepped as a budget in the outage simulation") {
		t.Errorf("VerifyCheck(Amplification) with a model that panics = %v, want the model blamed", err)
	}
}

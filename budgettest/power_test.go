package budgettest_test

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/model"
)

// The tests of this file each fail on a suite that passed a broken budget
// in silence: one that switched time off when a subject left Scale zero,
// compared no balance, skipped the concurrent checks for a model of the
// user's own, put a few hundred calls in a window, or jumped the clock by
// powers of two only.

// plain hides every optional interface of a model (model.Timed,
// model.Balanced, model.Starter, model.Validator), as a model of a user's
// own that implements only model.Model does.
type plain[S any] struct{ model.Model[S] }

var refilling = model.TokenBucket{Capacity: 30_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 10_000}

// A subject that leaves Scale zero gets its timing from a model.Timed
// model, so a bucket that drops refill fractions is caught; before, no
// clock step was made and it passed.
func TestTimingFromTheModel(t *testing.T) {
	t.Parallel()
	sub := budgettest.Subject[model.TokenBucketState]{Name: "LostFraction", Model: refilling,
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return mutants.NewLostFraction(refilling, c) }}
	err := budgettest.VerifyCheck(t, sub, budgettest.CheckSequential)
	if err == nil || !strings.Contains(err.Error(), "every answer equals the model's") {
		t.Fatalf("VerifyCheck(Sequential) = %v, want the sequential rule broken", err)
	}
	// The reference bucket on the same subject passes.
	sub.New = func(_ *testing.T, c budget.Clock) budget.Budget { return seqcheck.NewTokenBucket(refilling)(c) }
	for _, c := range []budgettest.Check{budgettest.CheckSequential, budgettest.CheckReplay} {
		if err := budgettest.VerifyCheck(t, sub, c); err != nil {
			t.Fatalf("the reference bucket, timing from its model, %s: %v", c, err)
		}
	}
}

// A model of your own whose answers depend on time, on a subject with no
// timing, fails the subject: no check would move the clock.
func TestTimeDependentModelNeedsTiming(t *testing.T) {
	t.Parallel()
	sub := budgettest.Subject[model.TokenBucketState]{Name: "untimed", Model: plain[model.TokenBucketState]{refilling},
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return seqcheck.NewTokenBucket(refilling)(c) }}
	err := budgettest.Verify(t, sub)
	if err == nil || !strings.Contains(err.Error(), "the model's answers depend on time") || !strings.Contains(err.Error(), "with it:") {
		t.Fatalf("Verify = %v, want the subject failed for its missing timing, with the two histories", err)
	}
	// The subject is fine once it has a scale, and a model of your own
	// that ignores time needs none (the Sequential check stands for the
	// rest: every check resolves timing the same way).
	sub.Scale = 1400 * time.Millisecond
	if err := budgettest.VerifyCheck(t, sub, budgettest.CheckSequential); err != nil {
		t.Fatalf("with Scale set: %v", err)
	}
	aws := model.AWS()
	if err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{Name: "timeless", Model: plain[model.TokenBucketState]{aws},
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return seqcheck.NewTokenBucket(aws)(c) }}, budgettest.CheckSequential); err != nil {
		t.Fatalf("a model that ignores time: %v", err)
	}
}

// lyingTimed says time changes nothing, though it refills.
type lyingTimed struct{ plain[model.TokenBucketState] }

func (lyingTimed) Timing() (time.Duration, time.Duration) { return 0, 0 }

func TestTimedModelThatLies(t *testing.T) {
	t.Parallel()
	err := budgettest.Verify(t, budgettest.Subject[model.TokenBucketState]{Name: "liar", Model: lyingTimed{plain[model.TokenBucketState]{refilling}},
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return seqcheck.NewTokenBucket(refilling)(c) }})
	if err == nil || !strings.Contains(err.Error(), "Timing() says time changes no answer") {
		t.Fatalf("Verify = %v, want the model's Timing reported false", err)
	}
}

// offset reports the reference bucket's balance plus a constant: within
// half a milli-token it agrees with the model at the precision the suite
// compares; a whole milli-token off, it does not.
type offset struct {
	*budget.TokenBucket
	by float64
}

func (o offset) Available() float64 { return o.TokenBucket.Available() + o.by }

func TestBalanceComparedToAThousandth(t *testing.T) {
	t.Parallel()
	m := model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	sub := func(by float64) budgettest.Subject[model.TokenBucketState] {
		return budgettest.Subject[model.TokenBucketState]{Name: "offset", Model: m,
			New: func(_ *testing.T, c budget.Clock) budget.Budget {
				return offset{seqcheck.NewTokenBucket(m)(c).(*budget.TokenBucket), by}
			}}
	}
	if err := budgettest.VerifyCheck(t, sub(0.0004), budgettest.CheckSequential); err != nil {
		t.Fatalf("a balance 0.0004 tokens off: %v", err)
	}
	err := budgettest.VerifyCheck(t, sub(0.001), budgettest.CheckSequential)
	if err == nil || !strings.Contains(err.Error(), "Available() =") {
		t.Fatalf("a balance 0.001 tokens off: VerifyCheck(Sequential) = %v, want the balance compared", err)
	}
}

// overgrant is a token bucket behind a mutex that grants one retry too
// many once in every 97 denials: sequentially wrong, and wrong under
// contention for any model, of the user's own too.
type overgrant struct {
	mu      sync.Mutex
	b       budget.Budget
	denials int
}

func (o *overgrant) Request() { o.b.Request() }
func (o *overgrant) Retry(k budget.Kind) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.b.Retry(k) {
		return true
	}
	if k.IsRetry() {
		o.denials++
	}
	return o.denials%97 == 96
}
func (o *overgrant) Success(k budget.Kind) { o.b.Success(k) }

// The Invariant check runs for a model of your own (before, it was
// skipped): its bursts bound grants both ways for any deterministic model.
func TestInvariantForAModelOfYourOwn(t *testing.T) {
	t.Parallel()
	m := model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	sub := budgettest.Subject[model.TokenBucketState]{Name: "overgrant", Model: plain[model.TokenBucketState]{m},
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return &overgrant{b: seqcheck.NewTokenBucket(m)(c)} }}
	err := budgettest.VerifyCheck(t, sub, budgettest.CheckInvariant)
	if err == nil || !strings.Contains(err.Error(), "grants exactly what the model grants") {
		t.Fatalf("VerifyCheck(Invariant) = %v, want the bursts rule broken", err)
	}
	sub.New = func(_ *testing.T, c budget.Clock) budget.Budget { return seqcheck.NewTokenBucket(m)(c) }
	if err := budgettest.VerifyCheck(t, sub, budgettest.CheckInvariant); err != nil {
		t.Fatalf("the reference bucket under a model of its own: %v", err)
	}
}

// The Replay check's volume replay puts 140,000 calls in one window: a
// request count that wraps at 2^16 is caught by it, and was by nothing.
func TestVolumeReplay(t *testing.T) {
	t.Parallel()
	m := model.SRE()
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.RatioState]{Name: "WrappingCount", Model: m,
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return mutants.NewWrappingCount(m, c) }}, budgettest.CheckReplay)
	if err == nil || !strings.Contains(err.Error(), `replay "volume"`) {
		t.Fatalf("VerifyCheck(Replay) = %v, want the volume replay to fail", err)
	}
}

// The jump replays, which land beside the thresholds where elapsed × rate
// overflows, catch a refill that overflows.
func TestJumpsBesideOverflow(t *testing.T) {
	t.Parallel()
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{Name: "OverflowingRefill", Model: refilling,
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return mutants.NewOverflowingRefill(refilling, c) }}, budgettest.CheckReplay)
	if err == nil || !strings.Contains(err.Error(), "replay \"jump of") {
		t.Fatalf("VerifyCheck(Replay) = %v, want a jump replay to fail", err)
	}
}

// grantsBesideSuccess is the reference throttle, except that a retry that
// arrives while a success is being recorded is granted whatever the
// throttle answers. Calls of one kind at a time, which is all the burst
// runs make, never show it; a retry that meets a success does, in the
// Invariant check's mixed stress runs.
type grantsBesideSuccess struct {
	budget.Budget
	inSuccess atomic.Int32
}

func (g *grantsBesideSuccess) Retry(k budget.Kind) bool {
	granted := g.Budget.Retry(k)
	return granted || g.inSuccess.Load() > 0 // BUG
}

func (g *grantsBesideSuccess) Success(k budget.Kind) {
	g.inSuccess.Add(1)
	defer g.inSuccess.Add(-1)
	runtime.Gosched() // a slow write, that other calls run beside
	g.Budget.Success(k)
}

// The Invariant check runs the family invariants after the bursts, and a
// budget they alone can see fails it by them.
func TestInvariantChecksTheFamilyAfterTheBursts(t *testing.T) {
	t.Parallel()
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.ThrottleState]{Name: "grants beside a success", Model: grpc,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			return &grantsBesideSuccess{Budget: seqcheck.NewThrottle(grpc)(c)}
		}}, budgettest.CheckInvariant)
	if err == nil || !strings.Contains(err.Error(), "stress run of seed") || !strings.Contains(err.Error(), "no retry granted at or below max/2") {
		t.Fatalf("VerifyCheck(Invariant) = %v, want the throttle's family invariant broken in a stress run", err)
	}
}

// timedAs is a model of your own whose Timing says what it is told.
type timedAs struct {
	plain[model.TokenBucketState]
	scale, horizon time.Duration
}

func (m timedAs) Timing() (time.Duration, time.Duration) { return m.scale, m.horizon }

// A model's Timing is checked like a subject's Scale and Horizon: a horizon
// as long as the scale is fine, a shorter one is not.
func TestModelTimingChecked(t *testing.T) {
	t.Parallel()
	newB := func(_ *testing.T, c budget.Clock) budget.Budget { return seqcheck.NewTokenBucket(refilling)(c) }
	tm := func(scale, horizon time.Duration) budgettest.Subject[model.TokenBucketState] {
		return budgettest.Subject[model.TokenBucketState]{Name: "timed as told", Model: timedAs{plain[model.TokenBucketState]{refilling}, scale, horizon}, New: newB}
	}
	if err := budgettest.VerifyCheck(t, tm(1400*time.Millisecond, 1400*time.Millisecond), budgettest.CheckSequential); err != nil {
		t.Errorf("Timing (1.4s, 1.4s): %v, want accepted", err)
	}
	for _, c := range [][2]time.Duration{{2 * time.Second, time.Second}, {0, time.Second}, {-time.Second, time.Second}, {time.Second, -time.Second}} {
		err := budgettest.VerifyCheck(t, tm(c[0], c[1]), budgettest.CheckSequential)
		if err == nil || !strings.Contains(err.Error(), "timed as told: the model's Timing() is") {
			t.Errorf("Timing (%v, %v): %v, want the subject failed for it", c[0], c[1], err)
		}
	}
}

// The probe of a model's use of time steps the clock once, between two
// calls, and shows that history beside the same calls without the step.
func TestTimeProbeStepsOnce(t *testing.T) {
	t.Parallel()
	sub := budgettest.Subject[model.TokenBucketState]{Model: plain[model.TokenBucketState]{refilling},
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return seqcheck.NewTokenBucket(refilling)(c) }}
	err := budgettest.Verify(t, sub)
	if err == nil {
		t.Fatal("Verify passed a time-dependent model with no timing")
	}
	msg := err.Error()
	_, with, ok := strings.Cut(msg, "with it:")
	with, _, _ = strings.Cut(with, "\n")
	if !ok || strings.Count(with, "advance") != 1 || !strings.Contains(msg, "the budget: Subject.Scale is 0") {
		t.Fatalf("want the unnamed subject called the budget, and one clock step in the history with it:\n%v", msg)
	}
}

// fractional reports its balance with six ten-thousandths of a token more
// than the whole milli-units it counts: a float bucket's view of a
// continuous refill, whose fraction the model keeps apart from its whole
// milli-units.
type fractional struct{ budget.Budget }

func (f fractional) Available() float64 {
	return f.Budget.(interface{ Available() float64 }).Available() + 0.0006
}

// A budget whose balance is the model's to a thousandth, a fraction of a
// milli-unit above it, passes the Sequential check (answers, balances and
// the long runs); rounded to the nearest milli-unit, as the check once
// did, 8.0006 was 8.001 against the model's 8.000, and it failed.
func TestFloatBalanceWithinAThousandthPasses(t *testing.T) {
	t.Parallel()
	sub := budgettest.Subject[model.TokenBucketState]{Name: "Fractional", Model: refilling,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			return fractional{seqcheck.NewTokenBucket(refilling)(c)}
		}}
	if err := budgettest.VerifyCheck(t, sub, budgettest.CheckSequential); err != nil {
		t.Fatalf("a balance a fraction of a milli-unit above the model's: %v", err)
	}
}

// flakyCount is shared by every budget flaky builds: the answers of one
// depend on the calls made to the others.
var flakyCount atomic.Int64

// flaky denies the 200th retry granted by all the budgets it builds,
// giving its cost back, and no other: the failure never comes again.
type flaky struct{ budget.Budget }

func (f flaky) Retry(k budget.Kind) bool {
	if !f.Budget.Retry(k) {
		return false
	}
	if flakyCount.Add(1) == 200 {
		f.Budget.Success(k) // the cost back: as if it had been denied
		return false
	}
	return true
}

// A budget whose answers depend on more than its own calls fails the
// Sequential check with a sentence that says so, not only with rapid's
// "flaky test" report.
func TestSequentialSaysWhenAFailureDoesNotReproduce(t *testing.T) {
	t.Parallel()
	flakyCount.Store(0)
	m := model.AWS()
	sub := budgettest.Subject[model.TokenBucketState]{Name: "Flaky", Model: m,
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return flaky{seqcheck.NewTokenBucket(m)(c)} }}
	err := budgettest.VerifyCheck(t, sub, budgettest.CheckSequential)
	if err == nil {
		t.Fatal("the Sequential check passed a budget that denied a retry the model grants")
	}
	if !strings.Contains(err.Error(), "the same calls on a new budget did not fail again") {
		t.Errorf("a failure that does not come again, without the suite's sentence:\n%v", err)
	}
}

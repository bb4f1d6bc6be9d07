package budgettest_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/mutants"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
)

var (
	bucket = model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	window = model.Ratio{PPM: 100_000, Window: 10 * time.Second, Slots: 10, Floor: 3}
)

func adapt[M any](f func(M) func(budget.Clock) budget.Budget, m M) budgettest.Factory {
	return func(_ *testing.T, c budget.Clock) budget.Budget { return f(m)(c) }
}

func TestReferenceBudgetsConform(t *testing.T) {
	t.Run("TokenBucket", func(t *testing.T) {
		budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{Name: "budget.TokenBucket", Model: bucket, New: adapt(seqcheck.NewTokenBucket, bucket)})
	})
	refill := model.TokenBucket{Capacity: 30_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 10_000}
	tm := seqcheck.TokenBucketTiming(refill)
	t.Run("TokenBucketRefill", func(t *testing.T) {
		budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{Name: "budget.TokenBucket", Model: refill, New: adapt(seqcheck.NewTokenBucket, refill), Scale: tm.Scale, Horizon: tm.Horizon})
	})
	t.Run("Ratio", func(t *testing.T) {
		budgettest.Run(t, budgettest.Subject[model.RatioState]{Name: "budget.Ratio", Model: window, New: adapt(seqcheck.NewRatio, window), Scale: time.Second, Horizon: 20 * time.Second})
	})
	th := model.Throttle{Max: 10_000, Ratio: 100}
	t.Run("Throttle", func(t *testing.T) {
		budgettest.Run(t, budgettest.Subject[model.ThrottleState]{Name: "budget.Throttle", Model: th, New: adapt(seqcheck.NewThrottle, th)})
	})
}

// A budget on the wall clock: the reference Ratio with its default clock,
// which reads time.Now. The suite checks it inside synctest bubbles.
func TestWallClockBudgetConforms(t *testing.T) {
	budgettest.Run(t, budgettest.Subject[model.RatioState]{
		Name:  "budget.Ratio on the wall clock",
		Model: window,
		New: func(*testing.T, budget.Clock) budget.Budget {
			c := seqcheck.RatioConfig(window, nil) // nil: the monotonic wall clock
			b, err := budget.NewRatio(c)
			if err != nil {
				panic(err)
			}
			return b
		},
		Scale: time.Second, Horizon: 20 * time.Second, WallClock: true, Scenarios: 10,
	})
}

func verify[S any](t *testing.T, sub budgettest.Subject[S]) error {
	t.Helper()
	err := budgettest.Verify(t, sub)
	if err == nil {
		t.Fatalf("%s passed the suite; it must fail", sub.Name)
	}
	t.Logf("as reported:\n%v", err)
	return err
}

// mustSay fails t unless err's text contains every part.
func mustSay(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("the failure does not say %q", p)
		}
	}
}

func TestSuiteCatchesMutants(t *testing.T) {
	t.Run("CheckThenAct", func(t *testing.T) {
		err := verify(t, budgettest.Subject[model.TokenBucketState]{Name: "CheckThenAct", Model: bucket,
			New: func(*testing.T, budget.Clock) budget.Budget { return mutants.NewCheckThenAct(bucket) }, Scenarios: 500})
		mustSay(t, err, "Linearizable:", "broken rule: every concurrent history has an order", "rule written at budgettest/rules.go:", "minimized scenario", "rendering: ")
	})
	t.Run("PerCallSite", func(t *testing.T) {
		aws := model.AWS()
		err := verify(t, budgettest.Subject[model.TokenBucketState]{Name: "PerCallSite", Model: aws,
			New: func(_ *testing.T, c budget.Clock) budget.Budget { return mutants.NewPerCallSite(aws, c) }})
		mustSay(t, err, "Amplification:", "the budget grants no more retries than its model")
	})
	t.Run("UnclampedRefund", func(t *testing.T) {
		err := verify(t, budgettest.Subject[model.TokenBucketState]{Name: "UnclampedRefund", Model: bucket,
			New: func(*testing.T, budget.Clock) budget.Budget { return mutants.NewUnclampedRefund(bucket) }})
		mustSay(t, err, "Sequential:", "broken rule: every answer equals the model's", "rule written at budgettest/rules.go:")
	})
}

// The four bad subjects: each gives a clear failure, and the run neither
// crashes nor hangs.
func TestBadSubjects(t *testing.T) {
	t.Run("FactoryPanics", func(t *testing.T) {
		err := verify(t, budgettest.Subject[model.TokenBucketState]{Name: "panicky", Model: bucket,
			New: func(*testing.T, budget.Clock) budget.Budget { panic("no config") }})
		mustSay(t, err, "the factory panicked: no config", "budgettest/rules.go:")
	})
	t.Run("FactoryReturnsNil", func(t *testing.T) {
		err := verify(t, budgettest.Subject[model.TokenBucketState]{Name: "nil", Model: bucket,
			New: func(*testing.T, budget.Clock) budget.Budget { return nil }})
		mustSay(t, err, "the factory returned a nil budget")
	})
	t.Run("Deadlocks", func(t *testing.T) {
		start := time.Now()
		err := verify(t, budgettest.Subject[model.TokenBucketState]{Name: "deadlocked", Model: bucket,
			New: func(*testing.T, budget.Clock) budget.Budget { return &deadlocked{} }, Watchdog: time.Second})
		mustSay(t, err, "every call returns: the budget neither deadlocks nor livelocks")
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("the suite took %v to give up on a deadlocked budget", d)
		}
	})
	t.Run("ModelNotDeterministic", func(t *testing.T) {
		err := verify(t, budgettest.Subject[model.ThrottleState]{Name: "flaky model", Model: &flakyModel{},
			New: adapt(seqcheck.NewThrottle, model.Throttle{Max: 10_000, Ratio: 100})})
		mustSay(t, err, "Model:", "the model is deterministic")
	})
}

// deadlocked's first Retry takes a lock it never releases.
type deadlocked struct{ mu sync.Mutex }

func (d *deadlocked) Request() {}
func (d *deadlocked) Retry(budget.Kind) bool {
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

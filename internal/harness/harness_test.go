package harness_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/model"
)

type boom struct{}

func (boom) Request()               {}
func (boom) Retry(budget.Kind) bool { panic("boom") }
func (boom) Success(budget.Kind)    {}

func fault(t *testing.T, err error) *harness.Fault {
	t.Helper()
	var f *harness.Fault
	if !errors.As(err, &f) {
		t.Fatalf("%v is not a *Fault", err)
	}
	return f
}

func TestPerformNamesThePanickingMethod(t *testing.T) {
	err := harness.Catch("a test", func() { harness.Perform(boom{}, model.OpRetry(model.Throttled)) })
	f := fault(t, err)
	if f.Cause != harness.MethodPanicked || f.Method != "Retry" || f.Op != model.OpRetry(model.Throttled) || f.Value != "boom" {
		t.Errorf("fault = %+v", f)
	}
	if !strings.Contains(err.Error(), "panicked at") || !strings.Contains(err.Error(), "harness_test.boom.Retry") {
		t.Errorf("the error does not say where it panicked:\n%v", err)
	}
	if err := harness.Catch("a test", func() {}); err != nil {
		t.Errorf("Catch of a function that returns = %v", err)
	}
}

func TestOpenMapsEachFactoryFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		new  func(budget.Clock) budget.Budget
		want harness.Cause
	}{
		{"panics", func(budget.Clock) budget.Budget { panic("no config") }, harness.FactoryPanicked},
		{"nil", func(budget.Clock) budget.Budget { return nil }, harness.FactoryNil},
		{"goexit", func(budget.Clock) budget.Budget { runtimeGoexit(); return nil }, harness.FactoryExited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := harness.Subject[struct{}]{New: tc.new}
			err := harness.Guard("opening", time.Second, func() error {
				sub.Open(new(budget.ManualClock))
				return nil
			})
			if f := fault(t, err); f.Cause != tc.want {
				t.Errorf("cause %v, want %v", f.Cause, tc.want)
			}
		})
	}
}

// Build, on the calling goroutine, maps a panic and a nil budget to the
// same causes as Open, and returns a budget and its closer otherwise.
func TestBuildMapsEachFactoryFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		new  func(budget.Clock) budget.Budget
		want harness.Cause
	}{
		{"panics", func(budget.Clock) budget.Budget { panic("no config") }, harness.FactoryPanicked},
		{"nil", func(budget.Clock) budget.Budget { return nil }, harness.FactoryNil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, closer, err := harness.Subject[struct{}]{New: tc.new}.Build(new(budget.ManualClock))
			if f := fault(t, err); f.Cause != tc.want || b != nil || closer != nil {
				t.Errorf("cause %v, budget %v, want %v and no budget", f.Cause, b, tc.want)
			}
		})
	}
	b, closer, err := harness.Subject[struct{}]{New: func(budget.Clock) budget.Budget {
		b, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
		return b
	}}.Build(new(budget.ManualClock))
	if err != nil || b == nil || closer == nil {
		t.Fatalf("Build of a working factory = %v, %v", b, err)
	}
	closer()
}

func TestGuardReportsAStuckCall(t *testing.T) {
	var mu sync.Mutex
	mu.Lock()
	err := harness.Guard("a stuck call", 100*time.Millisecond, func() error { mu.Lock(); return nil })
	if f := fault(t, err); f.Cause != harness.Stuck {
		t.Errorf("cause %v, want Stuck", f.Cause)
	}
}

// The generator's steps stay within their ranges, forward ones never go
// back, and the same seed draws the same lists.
func TestGeneratorIsBoundedAndRepeatable(t *testing.T) {
	tm := harness.Timing{Scale: time.Second, Horizon: 20 * time.Second, Forward: true}
	src := harness.Rand(rand.New(rand.NewPCG(1, 2)))
	for range 10_000 {
		if d := harness.Step(src, tm, 0); d < 0 || d > 100*tm.Horizon {
			t.Fatalf("forward step %v out of range", d)
		}
	}
	a, ac := harness.Lists(harness.Rand(rand.New(rand.NewPCG(5, 0))), 4, 50, 10, tm)
	b, bc := harness.Lists(harness.Rand(rand.New(rand.NewPCG(5, 0))), 4, 50, 10, tm)
	for i := range a {
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				t.Fatalf("list %d op %d: %v then %v", i, j, a[i][j], b[i][j])
			}
		}
	}
	if len(ac) != 10 || ac[3] != bc[3] {
		t.Errorf("clock steps %v and %v", ac, bc)
	}
}

// The far jumps are no powers of two, and lie beside MaxInt64 / m for the
// common multipliers m: the products wrap to values that are neither zero
// nor round.
func TestJumps(t *testing.T) {
	js := harness.Jumps(harness.Timing{Scale: 1400 * time.Millisecond})
	if len(js) < 30 {
		t.Fatalf("%d jumps, want at least 30", len(js))
	}
	near := map[int64]bool{}
	for _, j := range js {
		if j <= 0 || j&(j-1) == 0 {
			t.Errorf("jump %d is not a positive non-power of two", j)
		}
		for _, m := range []int64{1000, 1_000_000_000, 10_000} {
			if t := int64(math.MaxInt64) / m; int64(j) == t+1 {
				near[m] = true
			}
		}
	}
	if len(near) != 3 {
		t.Errorf("jumps beside MaxInt64/m for m in {1e3, 1e9, 1e4}: found %v", near)
	}
}

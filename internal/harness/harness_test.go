package harness_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
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

// A check that runs past the watchdog's limit while its budget's calls keep
// returning is slow, not stuck: Guard waits for it.
func TestGuardWaitsForASlowCheckThatMakesProgress(t *testing.T) {
	b, _, err := harness.Subject[struct{}]{New: func(budget.Clock) budget.Budget {
		b, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
		if err != nil {
			panic(err)
		}
		return b
	}}.Build(new(budget.ManualClock))
	if err != nil {
		t.Fatal(err)
	}
	err = harness.Guard("a slow check", 100*time.Millisecond, func() error {
		for range 40 { // 400ms, a call every 10ms
			harness.Perform(b, model.OpRequest)
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("a check whose calls return, slowly, past the limit: %v", err)
	}
}

// Time spent in a computation of the suite's own (Busy: the search for an
// order of a history) is not a budget that stopped returning; the same
// time spent outside Busy, with no call returning, is.
func TestGuardCountsBusyWorkAsProgress(t *testing.T) {
	err := harness.Guard("a long search", 50*time.Millisecond, func() error {
		harness.Busy(func() { time.Sleep(400 * time.Millisecond) })
		return nil
	})
	if err != nil {
		t.Fatalf("a check busy with its own bounded work past the limit: %v", err)
	}
	err = harness.Guard("a wait", 50*time.Millisecond, func() error {
		time.Sleep(400 * time.Millisecond)
		return nil
	})
	var f *harness.Fault
	if !errors.As(err, &f) || f.Cause != harness.Stuck {
		t.Fatalf("a check that waits past the limit, with no call returning and no work of its own: %v, want Stuck", err)
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

// floatAvailable is a budget that reports a fixed float balance.
type floatAvailable struct{ v float64 }

func (floatAvailable) Request()               {}
func (floatAvailable) Retry(budget.Kind) bool { return false }
func (floatAvailable) Success(budget.Kind)    {}
func (f floatAvailable) Available() float64   { return f.v }

// A float budget is compared to within a thousandth: the fraction of a
// milli-unit the model keeps apart, and float rounding below, pass; a
// whole milli-unit either way, or NaN, does not.
func TestBalanceWithinAThousandth(t *testing.T) {
	m := model.Throttle{Max: 10_000, Ratio: 100}
	state := model.ThrottleState{Tokens: 8_000}
	for _, tt := range []struct {
		got float64
		ok  bool
	}{
		{8, true},
		{8.00050001800003, true}, // a continuous refill's fraction
		{8.0009999, true},
		{7.9999999999, true}, // float rounding
		{8.001, false},       // one milli-unit too many, as 8001/1000
		{7.999, false},
		{7.9991, false}, // a fraction lost
		{8.0015, false},
		{math.NaN(), false},
		{math.Inf(1), false},
	} {
		sub := harness.Subject[model.ThrottleState]{Name: "float", Model: m}
		err := sub.Balance(floatAvailable{tt.got})(state)
		if (err == nil) != tt.ok {
			t.Errorf("Available() = %v against the model's 8.000: %v, want ok %v", tt.got, err, tt.ok)
		}
	}
	// The case: a float just under 9.1 where the model has 9.099
	// and a fraction.
	sub := harness.Subject[model.ThrottleState]{Name: "float", Model: m}
	if err := sub.Balance(floatAvailable{9.099999999})(model.ThrottleState{Tokens: 9_099}); err != nil {
		t.Errorf("9.099999999 against the model's 9.099: %v", err)
	}
}

// A budget that deadlocks, or leaks a goroutine, inside a testing/synctest
// bubble is reported as stuck or as a leak, not as a panic: the bubble's
// reports are panics of an error type of the runtime.
func TestBubbleDeadlockAndLeakKeepTheirCause(t *testing.T) {
	deadlock := harness.Catch("a deadlock in a bubble", func() {
		synctest.Test(t, func(*testing.T) {
			<-make(chan struct{})
		})
	})
	if f := fault(t, deadlock); f.Cause != harness.Stuck || !strings.Contains(f.Error(), "every goroutine") {
		t.Errorf("a deadlocked bubble: %v (cause %v), want Stuck", deadlock, f.Cause)
	}
	leak := harness.Catch("a leak from a bubble", func() {
		synctest.Test(t, func(*testing.T) {
			never := make(chan struct{})
			go func() { <-never }()
		})
	})
	if f := fault(t, leak); f.Cause != harness.Leaked {
		t.Errorf("a goroutine left blocked in a bubble: %v (cause %v), want Leaked", leak, f.Cause)
	}
}

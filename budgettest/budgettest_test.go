package budgettest_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
)

var (
	bucket = model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	refill = model.TokenBucket{Capacity: 30_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 10_000}
	window = model.Ratio{PPM: 100_000, Window: 10 * time.Second, Slots: 10, Floor: 3}
	grpc   = model.Throttle{Max: 10_000, Ratio: 100}
	envoy  = model.EnvoyDefaults()
	// Finagle's default RetryBudget: 20% over 10 s, and a reserve of
	// minRetriesPerSec 10 × ttl 10 s = 100 retries on top.
	finagle = model.Ratio{PPM: 200_000, Window: 10 * time.Second, Slots: 10, Reserve: 100}
	// A floor and a reserve that take turns: the floor's 3 retries below
	// 20 requests, 10% of the requests plus 2 from 20 on.
	floorReserve = model.Ratio{PPM: 100_000, Window: 10 * time.Second, Slots: 10, Floor: 3, Reserve: 2}
)

func adapt(f func(budget.Clock) budget.Budget) budgettest.Factory {
	return func(_ *testing.T, c budget.Clock) budget.Budget { return f(c) }
}

func TestReferenceBudgetsConform(t *testing.T) {
	t.Parallel()
	t.Run("TokenBucket", func(t *testing.T) {
		t.Parallel()
		budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{Name: "budget.TokenBucket", Model: bucket, New: adapt(seqcheck.NewTokenBucket(bucket))})
	})
	tm := seqcheck.TokenBucketTiming(refill)
	t.Run("TokenBucketRefill", func(t *testing.T) {
		t.Parallel()
		budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{Name: "budget.TokenBucket", Model: refill, New: adapt(seqcheck.NewTokenBucket(refill)), Scale: tm.Scale, Horizon: tm.Horizon})
	})
	t.Run("Ratio", func(t *testing.T) {
		t.Parallel()
		budgettest.Run(t, budgettest.Subject[model.RatioState]{Name: "budget.Ratio", Model: window, New: adapt(seqcheck.NewRatio(window)), Scale: time.Second, Horizon: 20 * time.Second})
	})
	t.Run("RatioReserve", func(t *testing.T) {
		t.Parallel()
		budgettest.Run(t, budgettest.Subject[model.RatioState]{Name: "budget.Ratio with a reserve", Model: finagle, New: adapt(seqcheck.NewRatio(finagle)), Scale: time.Second, Horizon: 20 * time.Second})
	})
	t.Run("RatioFloorAndReserve", func(t *testing.T) {
		t.Parallel()
		budgettest.Run(t, budgettest.Subject[model.RatioState]{Name: "budget.Ratio with a floor and a reserve", Model: floorReserve, New: adapt(seqcheck.NewRatio(floorReserve)), Scale: time.Second, Horizon: 20 * time.Second})
	})
	t.Run("Throttle", func(t *testing.T) {
		t.Parallel()
		budgettest.Run(t, budgettest.Subject[model.ThrottleState]{Name: "budget.Throttle", Model: grpc, New: adapt(seqcheck.NewThrottle(grpc))})
	})
	t.Run("InFlight", func(t *testing.T) {
		t.Parallel()
		budgettest.Run(t, budgettest.Subject[model.InFlightState]{Name: "budget.InFlight", Model: envoy, New: adapt(seqcheck.NewInFlight(envoy))})
	})
}

// A Ratio built with another Reserve than its model's fails the suite: one
// that ignores the reserve denies retries the model grants, and one that
// adds it twice grants retries the model denies. The first subtest of each
// pair leaves the budget's Available to the suite, which compares it with
// the model's balance after every operation; the second hides it
// (answersOnly), so that the answers to Retry alone must show the mismatch.
func TestRatioReserveMismatchFails(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	for _, m := range []model.Ratio{floorReserve, finagle} {
		for _, c := range []struct {
			name    string
			reserve int64
			want    string // in the failure's detail, from the answers alone
		}{
			{"IgnoresReserve", 0, "= denied, want granted"},
			{"AddsReserveTwice", 2 * m.Reserve, "= granted, want denied"},
		} {
			built := m
			built.Reserve = c.reserve
			name := "budget.Ratio with Reserve " + strconv.FormatInt(c.reserve, 10)
			t.Run(c.name+strconv.FormatInt(m.Reserve, 10), func(t *testing.T) {
				sub := budgettest.Subject[model.RatioState]{Name: name, Model: m, New: adapt(seqcheck.NewRatio(built))}
				if err := budgettest.VerifyCheck(t, sub, budgettest.CheckSequential); !errors.As(err, new(*budgettest.Failure)) {
					t.Fatalf("VerifyCheck(%s against Reserve %d, Sequential) = %v, want a *budgettest.Failure", name, m.Reserve, err)
				}
			})
			t.Run(c.name+strconv.FormatInt(m.Reserve, 10)+"AnswersOnly", func(t *testing.T) {
				sub := budgettest.Subject[model.RatioState]{Name: name + ", Available hidden", Model: m,
					New: func(_ *testing.T, clock budget.Clock) budget.Budget {
						return answersOnly{seqcheck.NewRatio(built)(clock)}
					}}
				err := budgettest.VerifyCheck(t, sub, budgettest.CheckSequential)
				var f *budgettest.Failure
				if !errors.As(err, &f) {
					t.Fatalf("VerifyCheck(%s against Reserve %d, Sequential) = %v, want a *budgettest.Failure", sub.Name, m.Reserve, err)
				}
				t.Logf("the failure:\n%v", f)
				if !strings.Contains(f.Detail, c.want) {
					t.Errorf("the failure does not show a retry %q:\n%v", c.want, f)
				}
			})
		}
	}
}

// answersOnly hides every method of a budget but budget.Budget's: the suite
// sees its answers, not its Available.
type answersOnly struct{ budget.Budget }

// A budget on the wall clock: the reference Ratio with its default clock,
// which reads time.Now. The suite checks it inside synctest bubbles.
func TestWallClockBudgetConforms(t *testing.T) {
	t.Parallel()
	budgettest.Run(t, budgettest.Subject[model.RatioState]{
		Name:  "budget.Ratio on the wall clock",
		Model: window,
		New: func(t *testing.T, _ budget.Clock) budget.Budget {
			b, err := budget.NewRatio(seqcheck.RatioConfig(window, nil)) // nil: the monotonic wall clock
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Scale: time.Second, Horizon: 20 * time.Second, WallClock: true, Scenarios: 10,
	})
}

// failures returns the Failures in err, as Verify joins them.
func failures(t *testing.T, err error) []*budgettest.Failure {
	t.Helper()
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else if err != nil {
		errs = []error{err}
	}
	var out []*budgettest.Failure
	for _, e := range errs {
		var f *budgettest.Failure
		if !errors.As(e, &f) {
			t.Errorf("%v is not a *Failure", e)
			continue
		}
		out = append(out, f)
	}
	return out
}

// expect runs Verify on sub and checks that it fails, that every Failure
// breaks the rule that contains rule, and that the failures say each of
// parts.
func expect[S any](t *testing.T, sub budgettest.Subject[S], rule string, parts ...string) []*budgettest.Failure {
	t.Helper()
	err := budgettest.Verify(t, sub)
	if err == nil {
		t.Fatalf("%s passed the suite; it must fail", sub.Name)
	}
	t.Logf("as reported:\n%v", err)
	fs := failures(t, err)
	for _, f := range fs {
		if !strings.Contains(f.Rule, rule) {
			t.Errorf("a failure breaks %q, want a rule saying %q:\n%v", f.Rule, rule, f)
		}
		if !strings.HasPrefix(f.Where, "budgettest/") {
			t.Errorf("Where = %q, want budgettest/file:line", f.Where)
		}
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("the failure does not say %q", p)
		}
	}
	return fs
}

func newRatio(m model.Ratio, c budget.Clock) budget.Budget { return seqcheck.NewRatio(m)(c) }

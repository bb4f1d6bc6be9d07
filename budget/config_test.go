package budget_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

func TestInvalidConfigs(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	bucket := func(edit func(*budget.TokenBucketConfig)) func() error {
		return func() error {
			c := budget.DefaultTokenBucketConfig()
			edit(&c)
			_, err := budget.NewTokenBucket(c)
			return err
		}
	}
	ratio := func(edit func(*budget.RatioConfig)) func() error {
		return func() error {
			c := budget.DefaultRatioConfig()
			edit(&c)
			_, err := budget.NewRatio(c)
			return err
		}
	}
	throttle := func(max, r float64) func() error {
		return func() error {
			_, err := budget.NewThrottle(max, r)
			return err
		}
	}
	tests := []struct {
		name string
		try  func() error
		want []string // substrings of the message: field, value, range
	}{
		{"CapacityZero", bucket(func(c *budget.TokenBucketConfig) { c.Capacity = 0 }), []string{"TokenBucketConfig.Capacity", "got 0", "[0.001, 1000000]"}},
		{"CapacityNegative", bucket(func(c *budget.TokenBucketConfig) { c.Capacity = -500 }), []string{"Capacity", "got -500", "[0.001, 1000000]"}},
		{"CapacityBelowOneMilliToken", bucket(func(c *budget.TokenBucketConfig) { c.Capacity = 0.0001; c.TransientCost = 0.0001 }), []string{"Capacity", "got 0.0001"}},
		{"CapacityNaN", bucket(func(c *budget.TokenBucketConfig) { c.Capacity = nan }), []string{"Capacity", "got NaN"}},
		{"CapacityInf", bucket(func(c *budget.TokenBucketConfig) { c.Capacity = inf }), []string{"Capacity", "got +Inf"}},
		{"CapacityTooLarge", bucket(func(c *budget.TokenBucketConfig) { c.Capacity = 2e6 }), []string{"Capacity", "got 2e+06", "[0.001, 1000000]"}},
		{"TransientCostAboveCapacity", bucket(func(c *budget.TokenBucketConfig) { c.Capacity = 10 }), []string{"TransientCost", "got 14", "[0.001, Capacity=10]"}},
		{"ThrottledCostAboveCapacity", bucket(func(c *budget.TokenBucketConfig) { c.Capacity = 14; c.ThrottledCost = 15 }), []string{"ThrottledCost", "got 15", "[0.001, Capacity=14]"}},
		{"TransientCostZero", bucket(func(c *budget.TokenBucketConfig) { c.TransientCost = 0 }), []string{"TransientCost", "got 0", "[0.001, Capacity=500]"}},
		{"ThrottledCostNaN", bucket(func(c *budget.TokenBucketConfig) { c.ThrottledCost = nan }), []string{"ThrottledCost", "got NaN"}},
		{"SuccessBonusNegative", bucket(func(c *budget.TokenBucketConfig) { c.SuccessBonus = -1 }), []string{"SuccessBonus", "got -1", "[0, Capacity=500]"}},
		{"RefillNegative", bucket(func(c *budget.TokenBucketConfig) { c.RefillPerSecond = -1 }), []string{"RefillPerSecond", "got -1", "[0, 1000000]"}},
		{"RefillInf", bucket(func(c *budget.TokenBucketConfig) { c.RefillPerSecond = inf }), []string{"RefillPerSecond", "got +Inf"}},
		{"RatioNaN", ratio(func(c *budget.RatioConfig) { c.Ratio = nan }), []string{"RatioConfig.Ratio", "got NaN", "(0, 1]"}},
		{"RatioInf", ratio(func(c *budget.RatioConfig) { c.Ratio = inf }), []string{"RatioConfig.Ratio", "got +Inf", "(0, 1]"}},
		{"RatioNegativeInf", ratio(func(c *budget.RatioConfig) { c.Ratio = math.Inf(-1) }), []string{"RatioConfig.Ratio", "got -Inf"}},
		{"RatioZero", ratio(func(c *budget.RatioConfig) { c.Ratio = 0 }), []string{"RatioConfig.Ratio", "got 0", "(0, 1]"}},
		{"RatioNegative", ratio(func(c *budget.RatioConfig) { c.Ratio = -0.1 }), []string{"RatioConfig.Ratio", "got -0.1"}},
		{"RatioAboveOne", ratio(func(c *budget.RatioConfig) { c.Ratio = 1.5 }), []string{"RatioConfig.Ratio", "got 1.5", "(0, 1]"}},
		{"RatioBelowOnePPM", ratio(func(c *budget.RatioConfig) { c.Ratio = 1e-9 }), []string{"RatioConfig.Ratio", "got 1e-09", "at least 0.000001"}},
		{"WindowZero", ratio(func(c *budget.RatioConfig) { c.Window = 0 }), []string{"RatioConfig.Window", "got 0s", "> 0"}},
		{"WindowNegative", ratio(func(c *budget.RatioConfig) { c.Window = -time.Second }), []string{"RatioConfig.Window", "got -1s"}},
		{"SlotsZero", ratio(func(c *budget.RatioConfig) { c.Slots = 0 }), []string{"RatioConfig.Slots", "got 0", "[1, 1048576]"}},
		{"SlotsNegative", ratio(func(c *budget.RatioConfig) { c.Slots = -10 }), []string{"RatioConfig.Slots", "got -10"}},
		{"SlotsTooMany", ratio(func(c *budget.RatioConfig) { c.Slots = 1 << 21 }), []string{"RatioConfig.Slots", "got 2097152", "[1, 1048576]"}},
		{"SlotsNarrowerThanOneNanosecond", ratio(func(c *budget.RatioConfig) { c.Window = 10; c.Slots = 11 }), []string{"RatioConfig.Slots", "got 11", "at most Window in nanoseconds (10)"}},
		{"FloorNegative", ratio(func(c *budget.RatioConfig) { c.Floor = -1 }), []string{"RatioConfig.Floor", "got -1", ">= 0"}},
		{"ReserveNegative", ratio(func(c *budget.RatioConfig) { c.Reserve = -1 }), []string{"RatioConfig.Reserve", "got -1", "[0, 1099511627776] (2^40)"}},
		{"ReserveAboveTwoToTheFortieth", ratio(func(c *budget.RatioConfig) { c.Reserve = 1<<40 + 1 }), []string{"RatioConfig.Reserve", "got 1099511627777", "[0, 1099511627776] (2^40)"}},
		{"MaxTokensZero", throttle(0, 0.1), []string{"maxTokens", "got 0", "(0, 1000]"}},
		{"MaxTokensNegative", throttle(-10, 0.1), []string{"maxTokens", "got -10"}},
		{"MaxTokensAbove1000", throttle(1000.5, 0.1), []string{"maxTokens", "got 1000.5", "(0, 1000]"}},
		{"MaxTokensNaN", throttle(nan, 0.1), []string{"maxTokens", "got NaN"}},
		{"MaxTokensInf", throttle(inf, 0.1), []string{"maxTokens", "got +Inf"}},
		{"TokenRatioZero", throttle(10, 0), []string{"tokenRatio", "got 0", "[0.001, 1000]"}},
		{"TokenRatioBelowThreeDecimals", throttle(10, 0.0009), []string{"tokenRatio", "got 0.0009"}},
		{"TokenRatioNaN", throttle(10, nan), []string{"tokenRatio", "got NaN"}},
		{"TokenRatioInf", throttle(10, inf), []string{"tokenRatio", "got +Inf"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("constructor panicked: %v", p)
					}
				}()
				err = tt.try()
			}()
			if err == nil {
				t.Fatal("constructor accepted an invalid config")
			}
			if !errors.Is(err, budget.ErrInvalidConfig) {
				t.Errorf("errors.Is(%v, ErrInvalidConfig) = false, want true", err)
			}
			var ce *budget.ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("error %v is not a *ConfigError", err)
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.HasPrefix(msg, "budget: ") {
				t.Errorf("error %q does not start with %q", msg, "budget: ")
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

// The edges of every range are accepted.
func TestBoundaryConfigs(t *testing.T) {
	ok := func(name string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v, want nil", name, err)
		}
	}
	_, err := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 14, TransientCost: 14, ThrottledCost: 14, SuccessBonus: 14})
	ok("costs and bonus equal to capacity", err)
	_, err = budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 1e6, TransientCost: 0.001, ThrottledCost: 0.001, RefillPerSecond: 1e6})
	ok("largest capacity and refill, smallest costs", err)
	_, err = budget.NewRatio(budget.RatioConfig{Ratio: 1, Window: 10, Slots: 10})
	ok("ratio 1, one-nanosecond slots, floor 0", err)
	_, err = budget.NewRatio(budget.RatioConfig{Ratio: 1e-6, Window: time.Duration(math.MaxInt64), Slots: 1 << 20})
	ok("smallest ratio, longest window, most slots", err)
	_, err = budget.NewRatio(budget.RatioConfig{Ratio: 1, Window: time.Second, Slots: 1, Reserve: 1 << 40})
	ok("largest reserve", err)
	_, err = budget.NewThrottle(1000, 1000)
	ok("largest max tokens and ratio", err)
	_, err = budget.NewThrottle(0.001, 0.001)
	ok("smallest max tokens and ratio", err)
}

func TestConfigErrorText(t *testing.T) {
	_, err := budget.NewRatio(budget.RatioConfig{Ratio: 1.5, Window: time.Second, Slots: 1})
	const want = "budget: RatioConfig.Ratio must be in (0, 1], got 1.5"
	if err == nil || err.Error() != want {
		t.Errorf("NewRatio(Ratio: 1.5) error = %v, want %q", err, want)
	}
}

// The ends of InFlightConfig's ranges are valid: a ratio of 1 (every call
// may have a retry in flight) and the largest MinConcurrency a count holds.
func TestNewInFlightRangeEnds(t *testing.T) {
	for _, c := range []budget.InFlightConfig{{Ratio: 1, MinConcurrency: 3}, {Ratio: 0.2, MinConcurrency: 4294967295}} {
		b, err := budget.NewInFlight(c)
		if err != nil {
			t.Fatalf("NewInFlight(%+v): %v", c, err)
		}
		for range 5 {
			b.Request()
		}
		// Ratio 1: five calls allow five retries; a floor of 2^32-1 allows
		// them too.
		for i := range 5 {
			if !b.Retry(budget.Transient) {
				t.Errorf("NewInFlight(%+v): retry %d of 5 beside 5 calls denied", c, i+1)
			}
		}
	}
}

// A tokenRatio of 1000, the top of its range, is kept: one success fills a
// throttle of 10 tokens from empty.
func TestThrottleRatioAtTheTopOfItsRange(t *testing.T) {
	th, err := budget.NewThrottle(10, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		th.Retry(budget.Transient)
	}
	th.Success(budget.FirstAttempt)
	if got := th.Available(); got != 10 {
		t.Errorf("after a drain and one success with tokenRatio 1000, Available() = %v; want 10", got)
	}
}

// Past a million requests the allowance still is the ratio of them: 10% of
// 2,000,000 is 200,000, read by Available.
func TestRatioAllowanceOfMillionsOfRequests(t *testing.T) {
	r, err := budget.NewRatio(budget.RatioConfig{Ratio: 0.1, Window: time.Minute, Slots: 10, Clock: new(budget.ManualClock)})
	if err != nil {
		t.Fatal(err)
	}
	for range 2_000_000 {
		r.Request()
	}
	if got := r.Available(); got != 200_000 {
		t.Errorf("after 2,000,000 requests at 10%%, Available() = %v; want 200000", got)
	}
}

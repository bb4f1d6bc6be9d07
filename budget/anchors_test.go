package budget_test

import (
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// A step is one call in a step-driven test. A step either performs an
// operation (op) and checks Retry's answer, or checks the balance.
type step struct {
	op      string      // "request", "retry", "success", "advance", "balance"
	kind    budget.Kind // for retry and success
	d       time.Duration
	granted bool    // want, for retry
	balance float64 // want, for balance
}

func retry(k budget.Kind, granted bool) step { return step{op: "retry", kind: k, granted: granted} }
func success(k budget.Kind) step             { return step{op: "success", kind: k} }
func request() step                          { return step{op: "request"} }
func advance(d time.Duration) step           { return step{op: "advance", d: d} }
func balance(want float64) step              { return step{op: "balance", balance: want} }

type balancer interface {
	budget.Budget
	Available() float64
}

// run performs steps on b in order, failing t at every step whose result
// differs from what it wants.
func run(t *testing.T, b budget.Budget, clock *budget.ManualClock, steps []step) {
	t.Helper()
	for i, s := range steps {
		switch s.op {
		case "request":
			b.Request()
		case "retry":
			if got := b.Retry(s.kind); got != s.granted {
				t.Errorf("step %d: Retry(%v) = %v, want %v", i, s.kind, got, s.granted)
			}
		case "success":
			b.Success(s.kind)
		case "advance":
			clock.Advance(s.d)
		case "balance":
			bb, ok := b.(balancer)
			if !ok {
				t.Fatalf("step %d: %T has no Available method", i, b)
			}
			if got := bb.Available(); got != s.balance {
				t.Errorf("step %d: Available() = %v, want %v", i, got, s.balance)
			}
		default:
			t.Fatalf("step %d: unknown op %q", i, s.op)
		}
	}
}

func repeat(n int, s ...step) []step {
	var out []step
	for range n {
		out = append(out, s...)
	}
	return out
}

func seq(parts ...[]step) []step {
	var out []step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func newBucket(t *testing.T, c budget.TokenBucketConfig) *budget.TokenBucket {
	t.Helper()
	b, err := budget.NewTokenBucket(c)
	if err != nil {
		t.Fatalf("NewTokenBucket(%+v) = %v", c, err)
	}
	return b
}

func newRatio(t *testing.T, c budget.RatioConfig) *budget.Ratio {
	t.Helper()
	b, err := budget.NewRatio(c)
	if err != nil {
		t.Fatalf("NewRatio(%+v) = %v", c, err)
	}
	return b
}

func newInFlight(t *testing.T, c budget.InFlightConfig) *budget.InFlight {
	t.Helper()
	b, err := budget.NewInFlight(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newThrottle(t *testing.T, max, ratio float64) *budget.Throttle {
	t.Helper()
	b, err := budget.NewThrottle(max, ratio)
	if err != nil {
		t.Fatalf("NewThrottle(%v, %v) = %v", max, ratio, err)
	}
	return b
}

func TestTokenBucketAnchors(t *testing.T) {
	t.Run("AWSTransientRetries", func(t *testing.T) {
		// AWS SDK for Go v2 v1.48.0: 500 tokens, 14 per transient retry,
		// and a successful retry refunds its own cost.
		run(t, newBucket(t, budget.DefaultTokenBucketConfig()), nil, []step{
			balance(500),
			retry(budget.Transient, true), balance(486),
			retry(budget.Transient, true), balance(472),
			success(budget.Transient), balance(486),
		})
	})
	t.Run("AWSThrottledCostsFive", func(t *testing.T) {
		run(t, newBucket(t, budget.DefaultTokenBucketConfig()), nil, []step{
			retry(budget.Throttled, true), balance(495),
			success(budget.Throttled), balance(500),
		})
	})
	t.Run("AWSFirstAttemptBonusClampsAtCapacity", func(t *testing.T) {
		run(t, newBucket(t, budget.DefaultTokenBucketConfig()), nil, []step{
			success(budget.FirstAttempt), balance(500),
			retry(budget.Transient, true), balance(486),
			success(budget.FirstAttempt), balance(487),
		})
	})
	t.Run("AWSDrainsAfter35TransientRetries", func(t *testing.T) {
		// 35 × 14 = 490; 10 left cannot pay 14 but can pay 5 twice.
		run(t, newBucket(t, budget.DefaultTokenBucketConfig()), nil, seq(
			repeat(35, retry(budget.Transient, true)),
			[]step{
				balance(10),
				retry(budget.Transient, false), balance(10),
				retry(budget.Throttled, true), retry(budget.Throttled, true),
				retry(budget.Throttled, false), balance(0),
			},
		))
	})
	t.Run("Seed004SmallBucket", func(t *testing.T) {
		// Seed 004: capacity 30, cost 14: granted, granted, denied (2
		// left); a successful retry then leaves 16.
		c := budget.DefaultTokenBucketConfig()
		c.Capacity = 30
		run(t, newBucket(t, c), nil, []step{
			retry(budget.Transient, true),
			retry(budget.Transient, true),
			retry(budget.Transient, false),
			balance(2),
			success(budget.Transient),
			balance(16),
		})
	})
	t.Run("RefundClampsAtCapacity", func(t *testing.T) {
		c := budget.DefaultTokenBucketConfig()
		c.Capacity = 30
		run(t, newBucket(t, c), nil, []step{
			retry(budget.Throttled, true), balance(25),
			success(budget.Transient), balance(30), // 25 + 14 clamps to 30
		})
	})
	t.Run("Seed000RefillAndBonus", func(t *testing.T) {
		// The bucket of the article "Retry budgets by language": 40 tokens, 1 per retry, +0.1 per success,
		// refilled at 1 token per second.
		clock := new(budget.ManualClock)
		b := newBucket(t, budget.TokenBucketConfig{
			Capacity: 40, TransientCost: 1, ThrottledCost: 1, SuccessBonus: 0.1,
			NoRefund: true, RefillPerSecond: 1, Clock: clock,
		})
		run(t, b, clock, seq(
			repeat(40, retry(budget.Transient, true)),
			[]step{
				retry(budget.Transient, false), balance(0),
				success(budget.Transient), balance(0.1), // NoRefund: the bonus, not the cost
				advance(900 * time.Millisecond), balance(1),
				retry(budget.Transient, true), balance(0),
				advance(time.Hour), balance(40),
			},
		))
	})
	t.Run("RefillCarriesFractions", func(t *testing.T) {
		// 1 token per second in steps of 0.3 ms: each step earns 0.3
		// milli-tokens, below the unit, yet 10000 steps earn 3 tokens.
		clock := new(budget.ManualClock)
		c := budget.DefaultTokenBucketConfig()
		c.Capacity, c.TransientCost, c.RefillPerSecond, c.Clock = 10, 10, 1, clock
		b := newBucket(t, c)
		run(t, b, clock, seq(
			[]step{retry(budget.Transient, true)},
			repeat(10_000, advance(300*time.Microsecond), success(budget.FirstAttempt)),
			// 10000 first-attempt bonuses of 1, clamped at 10: the
			// bucket is full whatever the refill did.
			[]step{balance(10)},
		))
		b = newBucket(t, budget.TokenBucketConfig{Capacity: 10, TransientCost: 10, ThrottledCost: 10, RefillPerSecond: 1, Clock: clock})
		run(t, b, clock, seq(
			[]step{retry(budget.Transient, true)},
			repeat(10_000, advance(300*time.Microsecond), retry(budget.Transient, false)),
			[]step{balance(3)},
		))
	})
}

func TestRatioAnchors(t *testing.T) {
	t.Run("FiftyRequestsAllowFive", func(t *testing.T) {
		run(t, newRatio(t, budget.RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Floor: 3, Clock: new(budget.ManualClock)}), nil, seq(
			repeat(50, request()),
			repeat(5, retry(budget.Transient, true)),
			[]step{retry(budget.Transient, false), retry(budget.Throttled, false)},
		))
	})
	t.Run("FiveRequestsStillAllowTheFloor", func(t *testing.T) {
		run(t, newRatio(t, budget.RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Floor: 3, Clock: new(budget.ManualClock)}), nil, seq(
			repeat(5, request()),
			repeat(3, retry(budget.Transient, true)),
			[]step{retry(budget.Transient, false)},
		))
	})
	t.Run("NoFloorNoTraffic", func(t *testing.T) {
		run(t, newRatio(t, budget.RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Floor: 0, Clock: new(budget.ManualClock)}), nil, seq(
			repeat(9, request()),
			[]step{retry(budget.Transient, false), request(), retry(budget.Transient, true), retry(budget.Transient, false)},
		))
	})
	t.Run("SlotsExpireAfterTheWindow", func(t *testing.T) {
		// 1 s slots. Retries made in slot 0 count until slot 10 begins.
		clock := new(budget.ManualClock)
		run(t, newRatio(t, budget.RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Floor: 3, Clock: clock}), clock, seq(
			repeat(3, retry(budget.Transient, true)),
			[]step{
				advance(9*time.Second + 999*time.Millisecond),
				retry(budget.Transient, false), // slot 9: slot 0 still counts
				advance(time.Millisecond),
				retry(budget.Transient, true), // slot 10: slot 0 has left
			},
		))
	})
	t.Run("RequestsExpireToo", func(t *testing.T) {
		clock := new(budget.ManualClock)
		run(t, newRatio(t, budget.RatioConfig{Ratio: 0.5, Window: 4 * time.Second, Slots: 4, Floor: 0, Clock: clock}), clock, seq(
			repeat(4, request()), // slot 0
			[]step{
				advance(2 * time.Second),
				request(), request(), // slot 2: 6 requests allow 3
				retry(budget.Transient, true), retry(budget.Transient, true), retry(budget.Transient, true),
				retry(budget.Transient, false),
				advance(2 * time.Second), // slot 4: slot 0 leaves; 2 requests allow 1, and 3 retries count
				retry(budget.Transient, false),
				advance(2 * time.Second), // slot 6: everything has left
				request(), request(),
				retry(budget.Transient, true), retry(budget.Transient, false),
			},
		))
	})
}

// Reserve is added to the ratio's allowance, and Floor is a minimum the
// sum is raised to: max(Floor, ⌊Ratio × requests⌋ + Reserve), on 10% here.
func TestRatioReserve(t *testing.T) {
	cfg := func(floor, reserve int) budget.RatioConfig {
		return budget.RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Floor: floor, Reserve: reserve, Clock: new(budget.ManualClock)}
	}
	t.Run("ReachedExactly", func(t *testing.T) {
		// 30 requests allow 3 + 2.
		run(t, newRatio(t, cfg(0, 2)), nil, seq(
			repeat(30, request()),
			[]step{balance(5)},
			repeat(5, retry(budget.Transient, true)),
			[]step{balance(0), retry(budget.Transient, false), retry(budget.Throttled, false)},
		))
	})
	t.Run("ARequestRaisesIt", func(t *testing.T) {
		// 29 requests allow ⌊2.9⌋ + 2 = 4; the 30th, one more.
		run(t, newRatio(t, cfg(0, 2)), nil, seq(
			repeat(29, request()),
			repeat(4, retry(budget.Transient, true)),
			[]step{retry(budget.Transient, false), request(), balance(1), retry(budget.Transient, true), retry(budget.Transient, false)},
		))
	})
	t.Run("NoTraffic", func(t *testing.T) {
		run(t, newRatio(t, cfg(0, 2)), nil, seq(
			[]step{balance(2)},
			repeat(2, retry(budget.Transient, true)),
			[]step{retry(budget.Transient, false)},
		))
	})
	t.Run("FloorAbove", func(t *testing.T) {
		// max(10, 3 + 2).
		run(t, newRatio(t, cfg(10, 2)), nil, seq(
			repeat(30, request()),
			[]step{balance(10)},
			repeat(10, retry(budget.Transient, true)),
			[]step{retry(budget.Transient, false)},
		))
	})
	t.Run("FloorBelow", func(t *testing.T) {
		// max(3, 3 + 2).
		run(t, newRatio(t, cfg(3, 2)), nil, seq(
			repeat(30, request()),
			[]step{balance(5)},
			repeat(5, retry(budget.Transient, true)),
			[]step{retry(budget.Transient, false)},
		))
	})
	t.Run("FloorAndReserveTakeTurns", func(t *testing.T) {
		// max(3, 0 + 2) with no requests, max(3, 1 + 2) at 10, max(3, 2 + 2) at 20.
		run(t, newRatio(t, cfg(3, 2)), nil, seq(
			repeat(3, retry(budget.Transient, true)),
			[]step{retry(budget.Transient, false)},
			repeat(10, request()),
			[]step{retry(budget.Transient, false)},
			repeat(10, request()),
			[]step{retry(budget.Transient, true), retry(budget.Transient, false)},
		))
	})
	t.Run("ComesBackAsTheWindowSlides", func(t *testing.T) {
		// The reserve is in every window: the retries that spent it leave
		// the window and it can be spent again.
		c := cfg(0, 2)
		clock := c.Clock.(*budget.ManualClock)
		run(t, newRatio(t, c), clock, seq(
			repeat(2, retry(budget.Transient, true)),
			[]step{retry(budget.Transient, false), advance(10 * time.Second), balance(2)},
			repeat(2, retry(budget.Transient, true)),
			[]step{retry(budget.Transient, false)},
		))
	})
	t.Run("Largest", func(t *testing.T) {
		// 2^40 and a ratio of 1: one request allows 2^40 + 1.
		r := newRatio(t, budget.RatioConfig{Ratio: 1, Window: time.Second, Slots: 1, Reserve: 1 << 40, Clock: new(budget.ManualClock)})
		run(t, r, nil, []step{request(), balance(1<<40 + 1), retry(budget.Transient, true), balance(1 << 40)})
	})
}

func TestThrottleAnchors(t *testing.T) {
	t.Run("BoundaryAtHalfOfMax", func(t *testing.T) {
		// gRFC A6: a retry is allowed only while tokens > max/2.
		// max 10: 9, 8, 7, 6 are above 5; 5 is not.
		run(t, newThrottle(t, 10, 0.1), nil, []step{
			retry(budget.Transient, true), balance(9),
			retry(budget.Transient, true),
			retry(budget.Transient, true),
			retry(budget.Throttled, true), balance(6),
			retry(budget.Transient, false), balance(5), // exactly max/2: denied, and still charged
			success(budget.FirstAttempt), balance(5.1),
			retry(budget.Transient, false), balance(4.1),
		})
	})
	t.Run("OddMax", func(t *testing.T) {
		// max 3: the threshold is 1.5, so 2 is allowed and 1 is not.
		run(t, newThrottle(t, 3, 1), nil, []step{
			retry(budget.Transient, true), balance(2),
			retry(budget.Transient, false), balance(1),
			success(budget.Transient), balance(2),
		})
	})
	t.Run("FloorAtZeroAndCapAtMax", func(t *testing.T) {
		run(t, newThrottle(t, 2, 0.5), nil, seq(
			repeat(5, retry(budget.Transient, false)),
			[]step{balance(0)},
			repeat(10, success(budget.FirstAttempt)),
			[]step{balance(2)},
		))
	})
	t.Run("RatioKeepsThreeDecimals", func(t *testing.T) {
		// gRFC A6: digits past the third decimal are ignored.
		run(t, newThrottle(t, 10, 0.0019), nil, seq(
			[]step{retry(budget.Transient, true), balance(9)},
			repeat(1000, success(budget.FirstAttempt)),
			[]step{balance(10)},
		))
		run(t, newThrottle(t, 10, 0.7), nil, []step{
			retry(budget.Transient, true), success(budget.FirstAttempt), balance(9.7),
		})
	})
	t.Run("InvalidKindChargesNothing", func(t *testing.T) {
		run(t, newThrottle(t, 10, 0.1), nil, []step{
			retry(budget.FirstAttempt, false), retry(budget.Kind(9), false), balance(10),
		})
	})
}

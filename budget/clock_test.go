package budget_test

import (
	"math"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// A clock that goes backwards never refills or expires anything twice: an
// instant earlier than the latest one seen counts as the latest one.

func TestTokenBucketClockBackwards(t *testing.T) {
	clock := new(budget.ManualClock)
	b := newBucket(t, budget.TokenBucketConfig{Capacity: 10, TransientCost: 1, ThrottledCost: 1, RefillPerSecond: 1, Clock: clock})
	run(t, b, clock, seq(
		repeat(10, retry(budget.Transient, true)),
		[]step{
			balance(0),
			advance(5 * time.Second), retry(budget.Transient, true), balance(4), // refilled 5, spent 1
			advance(-3 * time.Second), retry(budget.Transient, true), balance(3), // 2s counts as 5s: no refill
			advance(3 * time.Second), retry(budget.Transient, true), balance(2), // back at 5s: nothing new
			advance(time.Second), balance(3), // 6s: one more second
		},
	))
}

func TestTokenBucketClockFarJumps(t *testing.T) {
	clock := new(budget.ManualClock)
	b := newBucket(t, budget.TokenBucketConfig{Capacity: 1e6, TransientCost: 1e6, ThrottledCost: 1, RefillPerSecond: 1e6, Clock: clock})
	run(t, b, clock, []step{
		retry(budget.Transient, true), balance(0),
		advance(time.Duration(math.MaxInt64)), balance(1e6), // no overflow however far time jumps
		retry(budget.Transient, true),
		advance(math.MinInt64), // the reading wraps below the latest seen: no refill
		retry(budget.Throttled, false), balance(0),
	})
}

func TestRatioClockBackwards(t *testing.T) {
	clock := new(budget.ManualClock)
	b := newRatio(t, budget.RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Floor: 2, Clock: clock})
	run(t, b, clock, []step{
		retry(budget.Transient, true), retry(budget.Transient, true), retry(budget.Transient, false), // slot 0 holds 2
		advance(10 * time.Second), // slot 10: slot 0 has left
		retry(budget.Transient, true),
		advance(-5 * time.Second),      // 5s counts as 10s: slot 0 does not come back
		retry(budget.Transient, true),  // 2 in slot 10
		retry(budget.Transient, false), // and no more
		advance(5 * time.Second),       // 10s again: nothing expires twice
		retry(budget.Transient, false),
		advance(10 * time.Second), // 20s: slot 10 leaves
		retry(budget.Transient, true),
	})
}

func TestRatioClockExtremes(t *testing.T) {
	// Start near the bottom of int64 with 1ns slots, then jump to the top:
	// slot numbers span the whole range without overflow or a bad index.
	clock := new(budget.ManualClock)
	clock.Set(math.MinInt64 + 3)
	b := newRatio(t, budget.RatioConfig{Ratio: 1, Window: 7, Slots: 7, Floor: 1, Clock: clock})
	run(t, b, clock, []step{
		request(), retry(budget.Transient, true), retry(budget.Transient, false),
		advance(-2), retry(budget.Transient, false), // backwards, to MinInt64+1: counts as the latest
		advance(math.MaxInt64), retry(budget.Transient, true),
		advance(math.MaxInt64 - 5), request(), retry(budget.Transient, true), retry(budget.Transient, false),
	})
}

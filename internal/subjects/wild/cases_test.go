package wild

import (
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

// A Case is one broken budget and how to put it through the suite.
type Case struct {
	Name   string                   // e.g. "wild.FloatDriftBucket"
	Class  string                   // e.g. "balance drift"
	Bug    string                   // one sentence
	Verify func(t *testing.T) error // runs budgettest.Verify on the budget with the model it claims to follow
	// Check runs one check of the suite on the same subject, as
	// budgettest.VerifyCheck does.
	Check func(t *testing.T, c budgettest.Check) error
}

// The classes of bug.
const (
	ClassDrift       = "balance drift"
	ClassTime        = "time handling"
	ClassCredits     = "lost credits"
	ClassConcurrency = "concurrency"
	ClassVolume      = "volume"
	ClassDegenerate  = "degenerate constants"
)

// The models the cases claim to follow, with the parameters their budgets
// are built with. Quantities are milli-tokens.
var (
	plainModel    = model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	floatModel    = model.TokenBucket{Capacity: 300, TransientCost: 100, ThrottledCost: 50, SuccessBonus: 10}
	centiModel    = model.TokenBucket{Capacity: 10_000, TransientCost: 1_500, ThrottledCost: 500, SuccessBonus: 125}
	halfCostModel = model.TokenBucket{Capacity: 10_000, TransientCost: 2_500, ThrottledCost: 1_000, SuccessBonus: 500}
	slowRefill    = model.TokenBucket{Capacity: 10_000, TransientCost: 2_000, ThrottledCost: 1_000, SuccessBonus: 100, RefillPerSecond: 1_000}
	refillModel   = model.TokenBucket{Capacity: 30_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 10_000}
	sevenPerSec   = model.TokenBucket{Capacity: 50_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 7_000}
	tickModel     = model.TokenBucket{Capacity: 10_000, TransientCost: 2_000, ThrottledCost: 1_000, SuccessBonus: 125, RefillPerSecond: 2_000}
	sreModel      = model.SRE()
	ratio29Model  = model.Ratio{PPM: 290_000, Window: 10 * time.Second, Slots: 10, Floor: 3}
	thirdsModel   = model.Ratio{PPM: 100_000, Window: 10 * time.Second, Slots: 3, Floor: 3}
	grpcModel     = model.Throttle{Max: 10_000, Ratio: 100}
	sevenModel    = model.Throttle{Max: 7_000, Ratio: 300}
)

func mk[S any](class, bug string, sub budgettest.Subject[S]) Case {
	return Case{Name: sub.Name, Class: class, Bug: bug, Verify: func(t *testing.T) error {
		t.Helper()
		return budgettest.Verify(t, sub)
	}, Check: func(t *testing.T, c budgettest.Check) error {
		t.Helper()
		return budgettest.VerifyCheck(t, sub, c)
	}}
}

// plain builds a subject for a budget that does not read the clock.
func plain[S any](name string, m model.Model[S], f func() budget.Budget) budgettest.Subject[S] {
	return budgettest.Subject[S]{Name: name, Model: m, New: func(*testing.T, budget.Clock) budget.Budget { return f() }}
}

// timed builds a subject for a budget that reads the clock it is given.
func timed[S any](name string, m model.Model[S], scale, horizon time.Duration, f func(budget.Clock) budget.Budget) budgettest.Subject[S] {
	return budgettest.Subject[S]{Name: name, Model: m, Scale: scale, Horizon: horizon,
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return f(c) }}
}

func bucket(m model.TokenBucket, f func(c, tr, th, b int64) budget.Budget) func() budget.Budget {
	return func() budget.Budget { return f(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus) }
}

func refilling(m model.TokenBucket, f func(c, tr, th, b, r int64, clock budget.Clock) budget.Budget) func(budget.Clock) budget.Budget {
	return func(clock budget.Clock) budget.Budget {
		return f(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus, m.RefillPerSecond, clock)
	}
}

func ratio(m model.Ratio, f func(ppm int64, w time.Duration, slots, floor int64, c budget.Clock) budget.Budget) func(budget.Clock) budget.Budget {
	return func(c budget.Clock) budget.Budget { return f(m.PPM, m.Window, m.Slots, m.Floor, c) }
}

// Cases returns every broken budget of the package, in a fixed order.
func Cases() []Case {
	return []Case{
		// Balance drift.
		mk(ClassDrift, "The balance is a float64 of tokens, so 0.3 − 0.1 − 0.1 no longer pays a third retry of 0.1.",
			plain("wild.FloatDriftBucket", floatModel, func() budget.Budget { return NewFloatDriftBucket(0.3, 0.1, 0.05, 0.01) })),
		mk(ClassDrift, "Each refill truncates elapsed × rate to whole milli-tokens and drops the remainder, so many short steps refill less than one long one.",
			timed("wild.TruncatedRefillBucket", slowRefill, time.Second, 20*time.Second, refilling(slowRefill, func(c, tr, th, b, r int64, k budget.Clock) budget.Budget {
				return NewTruncatedRefillBucket(c, tr, th, b, r, k)
			}))),
		mk(ClassDrift, "The balance is kept in hundredths of a token, so a bonus of 0.125 is rounded to 0.13.",
			plain("wild.RoundedBonusBucket", centiModel, func() budget.Budget { return NewRoundedBonusBucket(10, 1.5, 0.5, 0.125) })),
		mk(ClassDrift, "The allowance is int64(float64(requests) × 0.29), and 100 × 0.29 is 28.999999999999996, so 100 requests allow 28 retries instead of 29.",
			timed("wild.FloatRatio", ratio29Model, time.Second, 20*time.Second, func(c budget.Clock) budget.Budget {
				return NewFloatRatio(0.29, ratio29Model.Window, ratio29Model.Slots, ratio29Model.Floor, c)
			})),

		// Time handling.
		mk(ClassTime, "A clock reading earlier than the last one refills a negative amount, and the same interval is refilled again when the clock comes back.",
			timed("wild.NegativeRefillBucket", refillModel, 500*time.Millisecond, 6*time.Second, refilling(refillModel, func(c, tr, th, b, r int64, k budget.Clock) budget.Budget {
				return NewNegativeRefillBucket(c, tr, th, b, r, k)
			}))),
		mk(ClassTime, "Refill is computed from the instant of the last Retry, which Success does not move, so an interval that a Success refilled is refilled again.",
			timed("wild.RetryOnlyBaseBucket", refillModel, 500*time.Millisecond, 6*time.Second, refilling(refillModel, func(c, tr, th, b, r int64, k budget.Clock) budget.Budget {
				return NewRetryOnlyBaseBucket(c, tr, th, b, r, k)
			}))),
		mk(ClassTime, "elapsed × rate is an int64 product taken before the full-bucket check, so at 7 tokens a second an idle gap of more than 2^63/7000 ns (about 15.25 days) wraps and drains the bucket.",
			timed("wild.OverflowRefillBucket", sevenPerSec, 2*time.Second, 15*time.Second, refilling(sevenPerSec, func(c, tr, th, b, r int64, k budget.Clock) budget.Budget {
				return NewOverflowRefillBucket(c, tr, th, b, r, k)
			}))),
		mk(ClassTime, "A clock reading earlier than the latest one clears the window, forgetting every request and retry counted in it.",
			timed("wild.ResetOnBackwardsRatio", sreModel, time.Second, 20*time.Second, ratio(sreModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewResetOnBackwardsRatio(p, w, s, f, c)
			}))),
		mk(ClassTime, "The current slot is left only once the clock is more than one width past its start (<= instead of <), so the instant that begins a slot counts in the slot before.",
			timed("wild.SlotBoundaryRatio", sreModel, time.Second, 20*time.Second, ratio(sreModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewSlotBoundaryRatio(p, w, s, f, c)
			}))),
		mk(ClassTime, "A slot counts as in the window while head − slot <= Slots instead of <, so a slot exactly one window old is still counted until its ring entry is reused.",
			timed("wild.InclusiveWindowRatio", sreModel, time.Second, 20*time.Second, ratio(sreModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewInclusiveWindowRatio(p, w, s, f, c)
			}))),
		mk(ClassTime, "The slot number is now / width with Go's truncating division, so before instant 0 slots are off by one and slot 0 is two widths long.",
			timed("wild.TruncatedSlotRatio", sreModel, time.Second, 20*time.Second, ratio(sreModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewTruncatedSlotRatio(p, w, s, f, c)
			}))),

		// Lost credits.
		mk(ClassCredits, "Success tries its compare-and-swap once, so a refund that meets a concurrent call is lost.",
			plain("wild.LostRefundBucket", plainModel, bucket(plainModel, func(c, tr, th, b int64) budget.Budget { return NewLostRefundBucket(c, tr, th, b) }))),
		mk(ClassCredits, "A credit that would take the balance over capacity is dropped whole instead of clamped.",
			plain("wild.DropBonusAtCapBucket", plainModel, bucket(plainModel, func(c, tr, th, b int64) budget.Budget { return NewDropBonusAtCapBucket(c, tr, th, b) }))),
		mk(ClassCredits, "Retry withdraws the cost before checking, and a denied retry leaves the balance at zero instead of unchanged.",
			plain("wild.ChargeOnDenyBucket", plainModel, bucket(plainModel, func(c, tr, th, b int64) budget.Budget { return NewChargeOnDenyBucket(c, tr, th, b) }))),
		mk(ClassCredits, "The throttle grants while 2 × tokens >= max instead of >, so it grants at exactly half of max.",
			plain("wild.AtHalfThrottle", grpcModel, func() budget.Budget { return NewAtHalfThrottle(grpcModel.Max, grpcModel.Ratio) })),
		mk(ClassCredits, "Retry subtracts first and adds the cost back when that overdrew, so concurrent calls see a dip: a retry is denied that should be granted, and a refund clamped against the dip pushes the balance over capacity.",
			plain("wild.AddThenUndoBucket", plainModel, bucket(plainModel, func(c, tr, th, b int64) budget.Budget { return NewAddThenUndoBucket(c, tr, th, b) }))),

		// Concurrency.
		mk(ClassConcurrency, "Retry loads, compares and stores without compare-and-swap, so concurrent retries overwrite each other's withdrawal.",
			plain("wild.CheckThenActBucket", plainModel, bucket(plainModel, func(c, tr, th, b int64) budget.Budget { return NewCheckThenActBucket(c, tr, th, b) }))),
		mk(ClassConcurrency, "The budget serves its calls from two goroutines it starts, and a worker's Retry loads, compares and then subtracts, so two workers can both spend the last tokens.",
			plain("wild.WorkerPoolBucket", plainModel, bucket(plainModel, func(c, tr, th, b int64) budget.Budget { return NewWorkerPoolBucket(c, tr, th, b) }))),
		mk(ClassConcurrency, "Success loads, adds and stores, so it can write back a balance from before a concurrent withdrawal.",
			plain("wild.LostChargeBucket", plainModel, bucket(plainModel, func(c, tr, th, b int64) budget.Budget { return NewLostChargeBucket(c, tr, th, b) }))),
		mk(ClassConcurrency, "The mutex covers the balance check but not the withdrawal, so concurrent retries overdraw the bucket.",
			plain("wild.SplitLockBucket", plainModel, bucket(plainModel, func(c, tr, th, b int64) budget.Budget { return NewSplitLockBucket(c, tr, th, b) }))),
		mk(ClassConcurrency, "The compare-and-swap loop reloads the old count on failure but keeps the new count computed from the first load, overwriting concurrent changes.",
			plain("wild.StaleCASThrottle", grpcModel, func() budget.Budget { return NewStaleCASThrottle(grpcModel.Max, grpcModel.Ratio) })),
		mk(ClassConcurrency, "Retry reads the window's totals after releasing the mutex, so concurrent retries all see room for one (and the read is a data race).",
			timed("wild.UnlockedReadRatio", sreModel, time.Second, 20*time.Second, ratio(sreModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewUnlockedReadRatio(p, w, s, f, c)
			}))),

		// Volume.
		mk(ClassVolume, "The window's counters are uint16, so after 65536 requests in one window the total wraps and the budget falls back to its floor.",
			timed("wild.Uint16Ratio", sreModel, time.Second, 20*time.Second, ratio(sreModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewUint16Ratio(p, w, s, f, c)
			}))),
		mk(ClassVolume, "The allowance is uint32(requests) × uint32(ppm) / 1e6, which wraps at 42950 requests in the window for a ratio of 0.1.",
			timed("wild.Product32Ratio", sreModel, time.Second, 20*time.Second, ratio(sreModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewProduct32Ratio(p, w, s, f, c)
			}))),

		// Degenerate constants.
		mk(ClassDegenerate, "Refill is paid in whole milliseconds, so it is exact while the clock moves in whole milliseconds and late by up to a millisecond's refill otherwise.",
			timed("wild.TickRefillBucket", tickModel, 500*time.Millisecond, 10*time.Second, refilling(tickModel, func(c, tr, th, b, r int64, k budget.Clock) budget.Budget {
				return NewTickRefillBucket(c, tr, th, b, r, k)
			}))),
		mk(ClassDegenerate, "Half of maxTokens is computed in whole tokens, so with maxTokens 7 a retry is granted with 3.1 to 3.5 tokens left.",
			plain("wild.WholeTokenHalfThrottle", sevenModel, func() budget.Budget { return NewWholeTokenHalfThrottle(7, 0.3) })),
		mk(ClassDegenerate, "The allowance is rounded to the nearest retry instead of down, so 45 requests at 0.1 allow 5 retries, not 4.",
			timed("wild.RoundedAllowanceRatio", sreModel, time.Second, 20*time.Second, ratio(sreModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewRoundedAllowanceRatio(p, w, s, f, c)
			}))),
		mk(ClassDegenerate, "Slots are numbered ⌊now × Slots / Window⌋, which equals ⌊now / (Window/Slots)⌋ only when Window is a multiple of Slots; with 10 s in 3 slots the boundaries are late.",
			timed("wild.ProportionalSlotRatio", thirdsModel, thirdsModel.Window/3, 20*time.Second, ratio(thirdsModel, func(p int64, w time.Duration, s, f int64, c budget.Clock) budget.Budget {
				return NewProportionalSlotRatio(p, w, s, f, c)
			}))),
		mk(ClassDegenerate, "Costs are converted to milli-tokens through whole tokens, so a cost of 2.5 tokens is charged (and refunded) as 2.",
			plain("wild.WholeTokenCostBucket", halfCostModel, func() budget.Budget { return NewWholeTokenCostBucket(10, 2.5, 1, 0.5) })),
	}
}

package classes

import (
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// TestEvidence shows each broken budget's bug without the suite: for
// classes 2 to 4 it forces the interleaving its doc comment names through
// testHook, checks the wrong outcome, and checks with the model's Step that
// no order of the calls explains it (and, for class 4, that one interfering
// call alone is harmless); for class 1 it checks agreement on random mixes
// of 50 operations, measures the shortest sequence that parts the budget
// from its model and replays it (evidence_float_test.go).
func TestEvidence(t *testing.T) {
	// Class 2: flags and caches published outside the critical section.
	t.Run("LateEmptyFlagBucket", func(t *testing.T) {
		d := newDriver(t, awsModel, func(budget.Clock) budget.Budget { return NewLateEmptyFlagBucket(awsModel) })
		d.seq(concat(repeat(34, retryT), repeat(3, retryTh))...) // 500 - 476 - 15 = 9 tokens
		d.race("lateflag.bucket.publish", retryTh, succTh)
		if !d.outer.granted || d.balance() != 9_000 {
			t.Fatalf("want the retry granted and 9 tokens, got %v, %d", d.outer, d.balance())
		}
		if got := d.after(retryTh); got[0] {
			t.Fatalf("want the throttled retry denied by the stale empty flag with 9 tokens held, got %v", got)
		}
		d.refute()
	})
	t.Run("LateLimitRatio", func(t *testing.T) {
		d := newDriver(t, sreModel, func(c budget.Clock) budget.Budget { return NewLateLimitRatio(sreModel, c) })
		d.seq(repeat(38, request)...)
		d.race("latelimit.ratio.publish", request, request)
		if got := d.after(repeat(4, retryT)...); !got[2] || got[3] {
			t.Fatalf("want 3 retries granted and the 4th denied with 40 requests in the window (the model allows 4), got %v", got)
		}
		d.refute()
	})
	t.Run("LateFullFlagThrottle", func(t *testing.T) {
		d := newDriver(t, throttleModel, func(budget.Clock) budget.Budget { return NewLateFullFlagThrottle(throttleModel) })
		d.seq(retryT)
		d.seq(repeat(9, succ1st)...) // 9.9 tokens
		d.race("lateflag.throttle.success", succ1st, retryT)
		if !d.inner[0].granted {
			t.Fatalf("want the inner retry granted, got %v", d.inner)
		}
		d.after(succ1st)
		if d.balance() != 9_000 {
			t.Fatalf("want the success after the race lost (9 tokens; the model has 9.1), got %d", d.balance())
		}
		if got := d.after(repeat(4, retryT)...); !got[2] || got[3] {
			t.Fatalf("want 3 retries granted and the 4th denied (the model, at 5.1 tokens, grants it), got %v", got)
		}
		d.refute()
	})
	t.Run("LateLimitInFlight", func(t *testing.T) {
		d := newDriver(t, envoyModel, func(budget.Clock) budget.Budget { return NewLateLimitInFlight(envoyModel) })
		d.seq(repeat(19, request)...)
		d.seq(retryT, retryT, retryT)
		d.race("latelimit.inflight.publish", request, callEnd)
		if got := d.after(retryT); !got[0] {
			t.Fatalf("want a 4th retry granted with 19 calls in flight (limit 3), got %v", got)
		}
		d.refute()
	})

	// Class 3: seqlock and version mistakes.
	t.Run("UncheckedSeqlockBucket", func(t *testing.T) {
		d := newDriver(t, refillModel, func(c budget.Clock) budget.Budget { return NewUncheckedSeqlockBucket(refillModel, c) })
		d.seq(retryT, retryT, retryT, retryTh) // 50 - 42 - 5 = 3 tokens
		d.seq(advance(time.Second))            // 2 tokens earned: 5 due
		d.race("seqlock.bucket.read", retryTh, succ1st)
		if d.outer.granted {
			t.Fatalf("want the retry denied on a torn snapshot (5 tokens due), got %v", d.outer)
		}
		d.refute()
	})
	t.Run("OddSeqlockRatio", func(t *testing.T) {
		d := newDriver(t, sreModel, func(c budget.Clock) budget.Budget { return NewOddSeqlockRatio(sreModel, c) })
		d.seq(retryT, retryT, retryT)
		d.seq(advance(10 * time.Second)) // the whole window gone by
		d.race("seqlock.ratio.publish", request, retryT)
		if d.inner[0].granted {
			t.Fatalf("want the retry denied on a half-published snapshot, got %v", d.inner)
		}
		d.refute()
	})
	t.Run("LateBumpSeqlockInFlight", func(t *testing.T) {
		d := newDriver(t, failsafeModel, func(budget.Clock) budget.Budget { return NewLateBumpSeqlockInFlight(failsafeModel) })
		d.seq(repeat(12, request)...)
		d.seq(retryT, retryT, retryT)
		d.race("seqlock.inflight.write", endT, retryT)
		if d.inner[0].granted {
			t.Fatalf("want the retry denied on a torn pair (3 retries of 14 executions), got %v", d.inner)
		}
		d.refute()
	})

	// Class 4: stale reads that need several operations of other goroutines.
	t.Run("OptimisticUndoBucket", func(t *testing.T) {
		build := func(budget.Clock) budget.Budget { return NewOptimisticUndoBucket(flatModel) }
		drained := repeat(10, retryT) // 0 tokens
		for _, single := range []model.Op{succT, succ1st, retryT, retryTh} {
			t.Run("only "+single.String(), func(t *testing.T) {
				d := newDriver(t, flatModel, build)
				d.seq(drained...)
				d.race("optimistic.bucket.undo", retryT, single)
				d.after(retryT, retryTh)
				d.explained()
			})
		}
		t.Run("two calls", func(t *testing.T) {
			d := newDriver(t, flatModel, build)
			d.seq(drained...)
			d.race("optimistic.bucket.undo", retryT, succT, retryT)
			if d.outer.granted || d.inner[1].granted || d.balance() != 1_000 {
				t.Fatalf("want both retries denied and 1 token left (under-grant), got %v %v %d", d.outer, d.inner, d.balance())
			}
			d.refute()
		})
	})
	t.Run("StaleLimitRatio", func(t *testing.T) {
		build := func(c budget.Clock) budget.Budget { return NewStaleLimitRatio(sreModel, c) }
		prefix := concat(repeat(39, request), []model.Op{retryT, retryT}) // limit 3, 2 retries
		for _, single := range []model.Op{request, retryT, advance(10 * time.Second)} {
			t.Run("only "+single.String(), func(t *testing.T) {
				d := newDriver(t, sreModel, build)
				d.seq(prefix...)
				d.race("stale.ratio.limit", retryT, single)
				d.after(retryT, retryT)
				d.explained()
			})
		}
		t.Run("two calls", func(t *testing.T) {
			d := newDriver(t, sreModel, build)
			d.seq(prefix...)
			d.race("stale.ratio.limit", retryT, request, retryT)
			if d.outer.granted || !d.inner[1].granted {
				t.Fatalf("want the outer retry denied and the inner granted (under-grant), got %v %v", d.outer, d.inner)
			}
			d.refute()
		})
	})
	t.Run("StaleLimitInFlight", func(t *testing.T) {
		build := func(budget.Clock) budget.Budget { return NewStaleLimitInFlight(envoyModel) }
		prefix := concat(repeat(19, request), []model.Op{retryT, retryT}) // limit 3, 2 retries
		for _, single := range []model.Op{request, retryT, endT, callEnd} {
			t.Run("only "+single.String(), func(t *testing.T) {
				d := newDriver(t, envoyModel, build)
				d.seq(prefix...)
				d.race("stale.inflight.limit", retryT, single)
				d.after(retryT, retryT)
				d.explained()
			})
		}
		t.Run("two calls", func(t *testing.T) {
			d := newDriver(t, envoyModel, build)
			d.seq(prefix...)
			d.race("stale.inflight.limit", retryT, request, retryT)
			if d.outer.granted || !d.inner[1].granted {
				t.Fatalf("want the outer retry denied and the inner granted (under-grant), got %v %v", d.outer, d.inner)
			}
			d.refute()
		})
	})

	// Class 1: float drift after long runs (evidence_float_test.go).
	t.Run("GRPCFloatThrottle", testGRPCFloatThrottle)
	t.Run("DimeBonusBucket", testDimeBonusBucket)
	t.Run("FloatRatio", testFloatRatio)
	t.Run("FloatPercentInFlight", testFloatPercentInFlight)
}

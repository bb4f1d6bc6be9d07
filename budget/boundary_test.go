package budget_test

// Boundary tests: each pins one edge of a documented rule (the end of
// MaxElapsed, the backoff cap, a slot boundary, a negative instant, a window
// of more than a million requests, the last nanosecond of a refill), found by
// mutation testing (gremlins) as edges the other tests did not reach.

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// ceilings runs a call of r that fails retries times and then succeeds, and
// returns the backoff ceiling the Retrier gave its Jitter before each retry.
// The Jitter picks 0, so the call never waits.
func ceilings(t *testing.T, r budget.Retrier, retries int) []time.Duration {
	t.Helper()
	var got []time.Duration
	r.Jitter = func(c time.Duration) time.Duration { got = append(got, c); return 0 }
	r.MaxAttempts = retries + 1
	n := 0
	err := r.Do(context.Background(), func(context.Context, budget.Attempt) error {
		n++
		if n <= retries {
			return errBoom
		}
		return nil
	})
	if err != nil || n != retries+1 {
		t.Fatalf("Do = %v after %d attempts, want nil after %d", err, n, retries+1)
	}
	return got
}

// wantCeilings returns min(maxDelay, base×2^(n-1)) for n = 1..retries,
// computed without overflow.
func wantCeilings(base, maxDelay time.Duration, retries int) []time.Duration {
	var want []time.Duration
	c := base
	for range retries {
		want = append(want, min(c, maxDelay))
		if c > maxDelay/2 {
			c = maxDelay
		} else {
			c *= 2
		}
	}
	return want
}

// Before retry n the ceiling is min(MaxDelay, BaseDelay×2^(n-1)), for every
// n, up to the largest durations.
func TestRetrierBackoffCeilings(t *testing.T) {
	tests := []struct {
		name            string
		base, maxDelay  time.Duration
		retries         int
		wantBase, wantM time.Duration // the delays in effect, after defaults
	}{
		{"doubles up to the cap", time.Second, 10 * time.Second, 6, time.Second, 10 * time.Second},
		// MaxDelay>>1 is exactly BaseDelay: retry 2 may wait 2s, not MaxDelay.
		{"an odd cap one step up", time.Second, 2*time.Second + 1, 3, time.Second, 2*time.Second + 1},
		{"cap equal to the base", time.Second, time.Second, 3, time.Second, time.Second},
		{"zero fields mean 100ms and 20s", 0, 0, 10, budget.DefaultBaseDelay, budget.DefaultMaxDelay},
		{"negative fields mean 100ms and 20s", -time.Second, -time.Second, 10, 100 * time.Millisecond, 20 * time.Second},
		// Exponents up to 62 fit in a Duration: retry 63 of a 1ns base
		// may wait 2^62ns; only retry 64 reaches the cap.
		{"1ns base, largest cap", 1, math.MaxInt64, 66, 1, math.MaxInt64},
		{"3ns base, largest cap", 3, math.MaxInt64, 66, 3, math.MaxInt64},
		{"1ns base, cap 2^61ns", 1, 1 << 61, 64, 1, 1 << 61},
		{"1ns base, cap 2^62ns+1", 1, 1<<62 + 1, 66, 1, 1<<62 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ceilings(t, budget.Retrier{BaseDelay: tt.base, MaxDelay: tt.maxDelay}, tt.retries)
			want := wantCeilings(tt.wantBase, tt.wantM, tt.retries)
			if len(got) != len(want) {
				t.Fatalf("%d ceilings, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("retry %d: ceiling %v (%d), want %v (%d)", i+1, got[i], int64(got[i]), want[i], int64(want[i]))
				}
			}
		})
	}
}

// MarkThrottled with a zero delay means the server gave none: the Retrier
// backs off as for any other failure, rather than retrying at once.
func TestRetrierThrottledWithoutServerDelayBacksOff(t *testing.T) {
	for _, err := range []error{budget.MarkThrottled(errBoom, 0), budget.MarkThrottled(errBoom, -time.Second)} {
		var ra interface{ RetryAfter() time.Duration }
		if errors.As(err, &ra) {
			t.Errorf("%v has a RetryAfter method (%v), want none", err, ra.RetryAfter())
		}
		var jitter []time.Duration
		r := &budget.Retrier{BaseDelay: 7 * time.Millisecond, Jitter: func(c time.Duration) time.Duration { jitter = append(jitter, c); return 0 }}
		op, attempts, _ := failing(err)
		if err := r.Do(context.Background(), op); err != nil || len(*attempts) != 2 {
			t.Fatalf("Do = %v after %d attempts, want nil after 2", err, len(*attempts))
		}
		if len(jitter) != 1 || jitter[0] != 7*time.Millisecond {
			t.Errorf("backoff ceilings %v, want [7ms]: a throttled error without a delay backs off", jitter)
		}
	}
	// A positive delay replaces the backoff: the Jitter is not asked.
	asked := false
	r := &budget.Retrier{Jitter: func(c time.Duration) time.Duration { asked = true; return c }}
	op, _, _ := failing(budget.MarkThrottled(errBoom, time.Nanosecond))
	if err := r.Do(context.Background(), op); err != nil || asked {
		t.Errorf("Do = %v, Jitter asked %v; want nil, not asked", err, asked)
	}
}

// sleepy is a budget whose Retry takes d to answer, as a remote budget does,
// and grants every retry.
type sleepy struct{ d time.Duration }

func (sleepy) Request()                 {}
func (s sleepy) Retry(budget.Kind) bool { time.Sleep(s.d); return true }
func (sleepy) Success(budget.Kind)      {}

// MaxElapsed bounds the start of the last attempt: a wait that would end at
// MaxElapsed exactly is not begun (ErrNoTime at once), one that ends a
// nanosecond before it is, and a retry that the budget's own delay pushes to
// MaxElapsed exactly is not made.
func TestRetrierMaxElapsedBoundary(t *testing.T) {
	full := func(c time.Duration) time.Duration { return c } // wait the whole ceiling
	t.Run("wait would end at MaxElapsed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &budget.Retrier{BaseDelay: time.Second, MaxElapsed: time.Second, Jitter: full}
			op, attempts, _ := failing(errBoom, errBoom)
			start := time.Now()
			err := r.Do(context.Background(), op)
			if !errors.Is(err, budget.ErrNoTime) || !errors.Is(err, errBoom) || len(*attempts) != 1 || time.Since(start) != 0 {
				t.Errorf("Do = %v after %d attempts and %v; want ErrNoTime at once after 1", err, len(*attempts), time.Since(start))
			}
		})
	})
	t.Run("wait ends 1ns before MaxElapsed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &budget.Retrier{BaseDelay: time.Second, MaxElapsed: time.Second + 1, Jitter: full}
			op, attempts, at := failing(errBoom)
			err := r.Do(context.Background(), op)
			if err != nil || len(*attempts) != 2 {
				t.Fatalf("Do = %v after %d attempts, want nil after 2", err, len(*attempts))
			}
			if w := (*at)[1].Sub((*at)[0]); w != time.Second {
				t.Errorf("retry started %v after the first attempt, want 1s", w)
			}
		})
	})
	t.Run("the budget's delay reaches MaxElapsed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The wait would end at 500ms when it is checked, but the
			// budget takes 500ms to grant it: the retry would start at 1s.
			r := &budget.Retrier{Budget: sleepy{500 * time.Millisecond}, BaseDelay: 500 * time.Millisecond, MaxElapsed: time.Second, Jitter: full}
			op, attempts, _ := failing(errBoom)
			start := time.Now()
			err := r.Do(context.Background(), op)
			if !errors.Is(err, budget.ErrNoTime) || !errors.Is(err, errBoom) || len(*attempts) != 1 || time.Since(start) != time.Second {
				t.Errorf("Do = %v after %d attempts and %v; want ErrNoTime after 1 attempt and 1s", err, len(*attempts), time.Since(start))
			}
		})
	})
	t.Run("the budget's delay ends 1ns before MaxElapsed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &budget.Retrier{Budget: sleepy{500 * time.Millisecond}, BaseDelay: 500 * time.Millisecond, MaxElapsed: time.Second + 1, Jitter: full}
			op, attempts, at := failing(errBoom)
			if err := r.Do(context.Background(), op); err != nil || len(*attempts) != 2 {
				t.Fatalf("Do = %v after %d attempts, want nil after 2", err, len(*attempts))
			}
			if w := (*at)[1].Sub((*at)[0]); w != time.Second {
				t.Errorf("retry started %v after the first attempt, want 1s", w)
			}
		})
	})
}

// A Key is 128 random bits: every one of its 16 bytes varies across calls.
func TestRetrierKeyUsesAllSixteenBytes(t *testing.T) {
	var nonzero [16]bool
	r := &budget.Retrier{}
	for range 64 {
		_ = r.Do(context.Background(), func(_ context.Context, a budget.Attempt) error {
			for i, b := range a.Key {
				if b != 0 {
					nonzero[i] = true
				}
			}
			return nil
		})
	}
	for i, ok := range nonzero {
		if !ok {
			t.Errorf("byte %d of the key was 0 in 64 calls", i)
		}
	}
}

func TestKindStringOfAnUnknownKind(t *testing.T) {
	if got := budget.Kind(3).String(); got != "Kind(3)" {
		t.Errorf("Kind(3).String() = %q, want \"Kind(3)\"", got)
	}
	if budget.Kind(3).IsRetry() {
		t.Error("Kind(3).IsRetry() = true")
	}
}

// The allowance is ⌊Ratio × requests⌋ exactly, for more than 10^6 requests
// too: 2 ppm of 1,499,999 requests is 2 retries; of 1,500,000, 3.
func TestRatioAllowanceAboveAMillionRequests(t *testing.T) {
	clock := new(budget.ManualClock)
	b := newRatio(t, budget.RatioConfig{Ratio: 2e-6, Window: time.Second, Slots: 1, Clock: clock})
	for range 1_499_999 {
		b.Request()
	}
	run(t, b, clock, []step{
		retry(budget.Transient, true), retry(budget.Throttled, true), retry(budget.Transient, false),
		request(),
		retry(budget.Transient, true), retry(budget.Transient, false),
	})
	// 0.7 of 1,428,572 requests is 1,000,000.4: 1,000,000 retries.
	b = newRatio(t, budget.RatioConfig{Ratio: 0.7, Window: time.Second, Slots: 1, Clock: clock})
	for range 1_428_572 {
		b.Request()
	}
	for i := range 1_000_000 {
		if !b.Retry(budget.Transient) {
			t.Fatalf("retry %d of 1,000,000 denied", i+1)
		}
	}
	if b.Retry(budget.Transient) {
		t.Error("retry 1,000,001 granted, want denied")
	}
}

// Slots are numbered by the instant divided by the width rounded down, for
// negative instants too: a count made at instant t leaves the window when
// slot ⌊t/width⌋+Slots begins, and not a nanosecond before.
func TestRatioSlotBoundariesAtNegativeInstants(t *testing.T) {
	const width = 3 // ns; Window 6ns in 2 slots
	tests := []struct {
		at, leaves time.Duration // leaves = (⌊at/3⌋ + 2) × 3
	}{
		{-10, -6}, // slot -4
		{-7, -3},  // slot -3
		{-6, 0},   // slot -2
		{-4, 0},   // slot -2
		{-3, 3},   // slot -1
		{-1, 3},   // slot -1
		{0, 6},    // slot 0
		{2, 6},    // slot 0
		{3, 9},    // slot 1
	}
	for _, tt := range tests {
		clock := new(budget.ManualClock)
		clock.Set(-100)
		b := newRatio(t, budget.RatioConfig{Ratio: 1, Window: 2 * width, Slots: 2, Clock: clock})
		clock.Set(tt.at)
		b.Request() // allows one retry while it is in the window
		clock.Set(tt.leaves - 1)
		if !b.Retry(budget.Transient) {
			t.Errorf("request at %dns: retry at %dns denied, want granted", tt.at, tt.leaves-1)
		}
		clock.Set(tt.leaves)
		b.Request() // a new request, but the retry above still counts
		if b.Retry(budget.Transient) {
			t.Errorf("request at %dns: a second retry at %dns granted, want denied", tt.at, tt.leaves)
		}
	}
}

// A window that spans instant 0 keeps the counts made before it.
func TestRatioWindowAcrossZero(t *testing.T) {
	clock := new(budget.ManualClock)
	clock.Set(-5 * time.Second)
	b := newRatio(t, budget.RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Clock: clock})
	clock.Set(-500 * time.Millisecond) // slot -1
	for range 20 {
		b.Request() // allow 2 retries
	}
	run(t, b, clock, []step{
		advance(600 * time.Millisecond), // 100ms, slot 0
		retry(budget.Transient, true),
		advance(9*time.Second - 100*time.Millisecond - 1), // 9s-1ns, slot 8: slot -1 is still in
		retry(budget.Transient, true), retry(budget.Transient, false),
		advance(1), // 9s, slot 9: slot -1 has left, and its 20 requests with it
		request(), request(), request(), request(), request(),
		request(), request(), request(), request(), request(), // allow 1, but 2 are in
		retry(budget.Transient, false),
		advance(time.Second), // 10s: slot 0 and its retry have left
		retry(budget.Transient, false),
		advance(8 * time.Second), // 18s, slot 18: slot 8 and its retry have left
		retry(budget.Transient, true), retry(budget.Transient, false),
	})
}

// countingClock counts its readings.
type countingClock struct{ reads int }

func (c *countingClock) Now() time.Duration { c.reads++; return time.Duration(c.reads) * time.Second }

// "Zero disables refill, and the bucket then never reads its Clock."
func TestTokenBucketWithoutRefillNeverReadsItsClock(t *testing.T) {
	clock := &countingClock{}
	b := newBucket(t, budget.TokenBucketConfig{Capacity: 2, TransientCost: 1, ThrottledCost: 1, SuccessBonus: 1, Clock: clock})
	b.Request()
	b.Retry(budget.Transient)
	b.Success(budget.Transient)
	b.Success(budget.FirstAttempt)
	b.Available()
	if clock.reads != 0 {
		t.Errorf("the clock was read %d times, want 0", clock.reads)
	}
}

// Refill reaches capacity at the first nanosecond by which it has earned the
// shortfall, rounded up, and a full bucket carries no fraction: a bucket
// refilled at 0.007 tokens/s is full 142,857,143ns after losing 0.001 (when
// it has earned 0.001000000001), and then starts again from a whole
// balance, with no nanosecond's credit kept.
func TestTokenBucketRefillRounding(t *testing.T) {
	clock := new(budget.ManualClock)
	b := newBucket(t, budget.TokenBucketConfig{Capacity: 1, TransientCost: 0.001, ThrottledCost: 0.007, RefillPerSecond: 0.007, Clock: clock})
	run(t, b, clock, []step{
		retry(budget.Transient, true), balance(0.999),
		advance(142_857_142), balance(0.999), // 0.000999999994 earned
		advance(1), balance(1), // 0.001000000001 earned: full
		retry(budget.Throttled, true), balance(0.993),
		// 857,142,857ns earn 0.005999999999: 5 whole milli-tokens, not 6.
		advance(857_142_857), balance(0.998),
		advance(1), balance(0.999),
		advance(142_857_141), balance(0.999), // 0.006999999993 earned
		advance(1), balance(1),
	})
}

// The balance never exceeds Capacity, however large the carried fraction:
// here 0.6 of a milli-token is carried when the bucket is 2 milli-tokens
// short, so it is full 1.4s later, and stays full.
func TestTokenBucketCarriedFractionNeverOverfills(t *testing.T) {
	clock := new(budget.ManualClock)
	b := newBucket(t, budget.TokenBucketConfig{Capacity: 1, TransientCost: 0.001, ThrottledCost: 0.001, RefillPerSecond: 0.001, Clock: clock})
	run(t, b, clock, []step{
		retry(budget.Transient, true), balance(0.999),
		advance(600 * time.Millisecond),
		retry(budget.Transient, true), balance(0.998), // 0.6 milli-token carried
		advance(1400*time.Millisecond - 1), balance(0.999),
		advance(1), balance(1),
		advance(1100 * time.Millisecond), balance(1),
		retry(budget.Transient, true), balance(0.999), // the fraction went with the fill
		advance(time.Second - 1), balance(0.999),
		advance(1), balance(1),
	})
}

// A retry that needs no wait sets no timer: it allocates less than one that
// waits (a performance property, as for a call that succeeds at once).
func TestRetrierZeroWaitSetsNoTimer(t *testing.T) {
	allocs := func(wait time.Duration) float64 {
		r := &budget.Retrier{Jitter: func(time.Duration) time.Duration { return wait }}
		n := 0
		op := func(context.Context, budget.Attempt) error {
			n++
			if n%2 == 1 {
				return errBoom
			}
			return nil
		}
		return testing.AllocsPerRun(100, func() { _ = r.Do(context.Background(), op) })
	}
	if zero, waited := allocs(0), allocs(time.Nanosecond); zero >= waited {
		t.Errorf("a retry with no wait allocates %v times, one with a 1ns wait %v; want fewer: no timer", zero, waited)
	}
}

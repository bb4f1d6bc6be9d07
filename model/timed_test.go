package model_test

import (
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/model"
)

func TestTiming(t *testing.T) {
	for _, c := range []struct {
		name           string
		m              model.Timed
		scale, horizon time.Duration
	}{
		{"bucket without refill", model.AWS(), 0, 0},
		{"bucket", model.TokenBucket{Capacity: 10_000, TransientCost: 3_000, ThrottledCost: 2_000, RefillPerSecond: 1_000}, 2 * time.Second, 10 * time.Second},
		{"bucket, rounded up", model.TokenBucket{Capacity: 10_000, TransientCost: 1, ThrottledCost: 5, RefillPerSecond: 3}, 333_333_334, 3_333_333_333_334},
		{"bucket, faster than a nanosecond", model.TokenBucket{Capacity: 1_000, TransientCost: 1, ThrottledCost: 1, RefillPerSecond: 1_000_000_000}, 1, time.Microsecond},
		{"bucket, slower than MaxTiming", model.TokenBucket{Capacity: 1_000_000_000, TransientCost: 1_000_000_000, ThrottledCost: 1_000_000_000, RefillPerSecond: 1}, model.MaxTiming, model.MaxTiming},
		{"ratio", model.SRE(), time.Second, 10 * time.Second},
		{"ratio, uneven slots", model.Ratio{PPM: 1, Window: 10, Slots: 3}, 3, 10},
		{"ratio, a window beyond MaxTiming", model.Ratio{PPM: 1, Window: 1 << 60, Slots: 1}, model.MaxTiming, model.MaxTiming},
		{"ratio, unusable", model.Ratio{PPM: 1}, 0, 0},
		{"ratio, no slots", model.Ratio{PPM: 1, Window: time.Second}, 0, 0},
		{"ratio, no window", model.Ratio{PPM: 1, Slots: 1}, 0, 0},
		{"bucket, a product past 2^64", model.TokenBucket{Capacity: 20_000_000_000, TransientCost: 1, ThrottledCost: 1, RefillPerSecond: 1}, time.Second, model.MaxTiming},
		{"throttle", model.Throttle{Max: 10_000, Ratio: 100}, 0, 0},
	} {
		scale, horizon := c.m.Timing()
		if scale != c.scale || horizon != c.horizon {
			t.Errorf("%s: Timing() = (%v, %v), want (%v, %v)", c.name, scale, horizon, c.scale, c.horizon)
		}
	}
}

// A model whose Timing says time does not matter must not change with
// time, and one that says it does must: the Timing of each model agrees
// with its Step.
func TestTimingAgreesWithStep(t *testing.T) {
	bucket := model.TokenBucket{Capacity: 10_000, TransientCost: 3_000, ThrottledCost: 2_000, RefillPerSecond: 1_000}
	s := bucket.Init()
	s, _ = bucket.Step(s, model.OpRetry(model.Transient))
	scale, _ := bucket.Timing()
	a, _ := bucket.Step(s, model.OpAdvance(scale-1))
	if bucket.Balance(a) >= 10_000 || bucket.Balance(a) == 7_000 {
		t.Fatalf("balance %d after a step of scale-1", bucket.Balance(a))
	}
	noRefill := model.AWS()
	s2 := noRefill.Init()
	s3, _ := noRefill.Step(s2, model.OpAdvance(time.Hour))
	if !noRefill.Equal(s2, s3) {
		t.Fatal("a bucket without refill changed with time, but its Timing says time does not matter")
	}
}

package fuzzops_test

import (
	"math"
	"time"

	"github.com/retrybudget/retrybudget/model"
)

// The parameter mappers of the fuzz targets: each maps arbitrary numbers
// onto valid parameters of a reference model.

// between maps x into [lo, hi] (lo <= hi), spreading the int64 range over
// it, so that most fuzzer inputs are valid parameters.
func between(x, lo, hi int64) int64 {
	span := uint64(hi - lo)
	if span == math.MaxUint64 {
		return x
	}
	return lo + int64(uint64(x)%(span+1))
}

// tokenBucketOf maps arbitrary numbers onto valid token-bucket parameters (in
// milli-tokens): capacity up to 1,000,000 tokens, costs and bonus up to the
// capacity, refill up to 1,000,000 tokens a second, half of the time none.
func tokenBucketOf(capacity, transient, throttled, bonus, refill int64, noRefund bool) model.TokenBucket {
	c := between(capacity, 1, 1_000_000_000)
	m := model.TokenBucket{
		Capacity:      c,
		TransientCost: between(transient, 1, c),
		ThrottledCost: between(throttled, 1, c),
		SuccessBonus:  between(bonus, 0, c),
		NoRefund:      noRefund,
	}
	if refill%2 != 0 {
		m.RefillPerSecond = between(refill/2, 1, 1_000_000_000)
	}
	return m
}

// ratioOf maps arbitrary numbers onto valid ratio parameters: any positive
// window, 1 to 1024 slots (no more than the window's nanoseconds), any ratio
// from 1 ppm to 1, a floor of 0 to 7.
func ratioOf(window int64, slots uint16, ppm uint32, floor uint8) model.Ratio {
	w := between(window, 1, math.MaxInt64)
	return model.Ratio{
		Window: time.Duration(w),
		Slots:  between(int64(slots), 1, min(1024, w)),
		PPM:    between(int64(ppm), 1, 1_000_000),
		Floor:  int64(floor % 8),
	}
}

// throttleOf maps arbitrary numbers onto valid throttle parameters: up to
// 1000 tokens, a ratio from 0.001 to 1000 tokens.
func throttleOf(max, ratio int64) model.Throttle {
	return model.Throttle{Max: between(max, 1, 1_000_000), Ratio: between(ratio, 1, 1_000_000)}
}

package fuzzops_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/fuzzops"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
)

// heavy returns a megabyte of input that decodes to the costliest
// operations: clock moves of random size between retries and requests.
// Ops stops at fuzzops.MaxOps of them.
func heavy() []byte {
	r := rand.New(rand.NewPCG(1, 1))
	var ops []model.Op
	for len(ops) < 1<<17 {
		ops = append(ops, model.OpRequest, model.OpRetry(model.Transient), model.OpAdvance(time.Duration(r.Int64N(int64(time.Hour)))), model.OpSuccess(model.Throttled))
	}
	return fuzzops.Encode(ops)
}

// BenchmarkWorstInput measures one fuzz input at its worst: the longest
// operation sequence Ops decodes, on the largest budgets the targets draw.
// Every input of the fuzz targets costs at most this.
func BenchmarkWorstInput(b *testing.B) {
	data := heavy()
	b.Logf("%d bytes decode to %d operations", len(data), len(fuzzops.Ops(data)))
	ratio := model.Ratio{PPM: 1, Window: time.Hour, Slots: 1024, Floor: 7}
	bucket := model.TokenBucket{Capacity: 1_000_000_000, TransientCost: 1, ThrottledCost: 1, SuccessBonus: 1, RefillPerSecond: 1_000_000_000}
	throttle := model.Throttle{Max: 1_000_000, Ratio: 1}
	b.Run("Ratio", func(b *testing.B) {
		for b.Loop() {
			seqcheck.Replay(seqcheck.Subject[model.RatioState]{Model: ratio, New: seqcheck.NewRatio(ratio)}, ratio.Init(), 0, fuzzops.Ops(data))
		}
	})
	b.Run("TokenBucket", func(b *testing.B) {
		for b.Loop() {
			seqcheck.Replay(seqcheck.Subject[model.TokenBucketState]{Model: bucket, New: seqcheck.NewTokenBucket(bucket)}, bucket.Init(), 0, fuzzops.Ops(data))
		}
	})
	b.Run("Throttle", func(b *testing.B) {
		for b.Loop() {
			seqcheck.Replay(seqcheck.Subject[model.ThrottleState]{Model: throttle, New: seqcheck.NewThrottle(throttle)}, throttle.Init(), 0, fuzzops.Ops(data))
		}
	})
}

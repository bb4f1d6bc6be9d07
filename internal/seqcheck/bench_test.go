package seqcheck_test

import (
	"testing"

	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
)

// BenchmarkLong is one long run of the Sequential check (10,000
// operations, each compared with the model's answer and balance) on a
// reference budget: the check makes four of 100,000 on every budget.
func BenchmarkLong(b *testing.B) {
	const ops = 10_000
	run := func(name string, long func(seed uint64) *seqcheck.Divergence) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if d := long(uint64(i)); d != nil {
					b.Fatal(d)
				}
			}
			b.ReportMetric(float64(b.N*ops)/b.Elapsed().Seconds(), "ops/s")
		})
	}
	run("TokenBucket", func(seed uint64) *seqcheck.Divergence {
		return seqcheck.Long(subjectOf[model.TokenBucketState](model.AWS(), seqcheck.TokenBucketTiming(model.AWS()), seqcheck.NewTokenBucket(model.AWS())), seed, ops)
	})
	run("Ratio", func(seed uint64) *seqcheck.Divergence {
		return seqcheck.Long(subjectOf[model.RatioState](model.SRE(), seqcheck.RatioTiming(model.SRE()), seqcheck.NewRatio(model.SRE())), seed, ops)
	})
	run("Throttle", func(seed uint64) *seqcheck.Divergence {
		return seqcheck.Long(subjectOf[model.ThrottleState](throttle, seqcheck.Timing{}, seqcheck.NewThrottle(throttle)), seed, ops)
	})
}

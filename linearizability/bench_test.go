package linearizability_test

import (
	"testing"

	"github.com/retrybudget/retrybudget/linearizability"
)

// benchmarkCheck records one history of about 10,000 operations on a
// reference budget (4 goroutines of 2,500 operations, with 500 clock steps
// when the budget reads time) and measures how fast Check searches it.
func benchmarkCheck[S any](b *testing.B, tg target[S]) {
	h := tg.trial(b, tg.scenario(99, 4, 2500)).History
	b.ReportAllocs()
	for b.Loop() {
		if r := linearizability.Check(tg.model, h, checkTimeout); r.Verdict != linearizability.Linearizable {
			b.Fatalf("%v\n%s", r.Verdict, r.Explain())
		}
	}
	b.ReportMetric(float64(len(h))*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(len(h)), "ops/history")
}

func BenchmarkCheck10k(b *testing.B) {
	b.Run("TokenBucket", func(b *testing.B) { benchmarkCheck(b, tokenBucket(smallBucket)) })
	b.Run("TokenBucketRefill", func(b *testing.B) { benchmarkCheck(b, tokenBucket(refillBucket)) })
	b.Run("Ratio", func(b *testing.B) { benchmarkCheck(b, ratio(shortRatio)) })
	b.Run("Throttle", func(b *testing.B) { benchmarkCheck(b, throttle(grpcThrottle)) })
}

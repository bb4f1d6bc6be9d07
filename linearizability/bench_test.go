package linearizability_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/retrybudget/retrybudget/linearizability"
)

// benchmarkCheck records one history of about 10,000 operations on a
// reference budget (4 goroutines of 2,400 operations and 400 clock steps
// when the budget reads time) and measures how fast Check searches it.
func benchmarkCheck[S any](b *testing.B, sub linearizability.Subject[S]) {
	gen := sub.Gen
	gen.Ops = 2500
	if gen.Scale > 0 {
		gen.Ops, gen.ClockSteps = 2400, 400
	}
	s := linearizability.Generate(rand.New(rand.NewPCG(99, 0)), gen)
	h, err := linearizability.Record(context.Background(), s, sub.New)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r := linearizability.Check(sub.Model, h, checkTimeout); r.Verdict != linearizability.Linearizable {
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

package redisbudget_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/redisbudget"
)

// benchmarkCalls runs b.N retry-and-refund pairs on budgets from newBudget
// (one per client goroutine) and reports ops/s and the p50 and p99 latency
// of one call.
func benchmarkCalls(b *testing.B, clients int, newBudget func() budget.Budget) {
	budgets := make([]budget.Budget, clients)
	for i := range budgets {
		budgets[i] = newBudget()
	}
	lat := make([][]time.Duration, clients)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		n := b.N / clients
		if c < b.N%clients {
			n++
		}
		lat[c] = make([]time.Duration, 0, 2*n)
		wg.Go(func() {
			bud := budgets[c]
			for range n {
				t0 := time.Now()
				ok := bud.Retry(budget.Transient)
				t1 := time.Now()
				lat[c] = append(lat[c], t1.Sub(t0))
				if ok {
					bud.Success(budget.Transient)
					lat[c] = append(lat[c], time.Since(t1))
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
		b.ReportMetric(float64(all[len(all)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds())/1e3, "p99-µs")
	}
}

func BenchmarkCalls(b *testing.B) {
	for _, clients := range []int{1, 8} {
		name := "sequential"
		if clients > 1 {
			name = "8clients"
		}
		b.Run("InProcessTokenBucket/"+name, func(b *testing.B) {
			shared, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
			benchmarkCalls(b, clients, func() budget.Budget { return shared })
		})
		b.Run("RedisTokenBucket/"+name, func(b *testing.B) {
			s := startServerTB(b)
			nameKey := fresh("bench")
			benchmarkCalls(b, clients, func() budget.Budget {
				bud, err := redisbudget.NewTokenBucket(redisbudget.Config{Client: s.clientTB(b), Name: nameKey, CallTimeout: time.Second}, budget.DefaultTokenBucketConfig())
				if err != nil {
					b.Fatal(err)
				}
				return bud
			})
		})
		b.Run("RedisRatio/"+name, func(b *testing.B) {
			s := startServerTB(b)
			nameKey := fresh("bench")
			benchmarkCalls(b, clients, func() budget.Budget {
				bud, err := redisbudget.NewRatio(redisbudget.Config{Client: s.clientTB(b), Name: nameKey, CallTimeout: time.Second}, budget.DefaultRatioConfig())
				if err != nil {
					b.Fatal(err)
				}
				return bud
			})
		})
	}
}

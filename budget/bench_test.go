package budget_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// The retry/success loop: each iteration asks for a transient retry and,
// when granted, reports it successful, which refunds it. The bucket stays
// full, so every budget takes its granting path on every iteration.
//
// Compare TokenBucket with AtomicFloor and CASFloor from the same run:
//
//	go test -run '^$' -bench 'RetrySuccess' -cpu 1,2 ./budget
//
// The AWS SDK's quota is measured beside TokenBucket in awsbudget's
// benchmarks, in the module that requires the SDK.

func benchmarkRetrySuccess(b *testing.B, bud budget.Budget) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bud.Request()
			if bud.Retry(budget.Transient) {
				bud.Success(budget.Transient)
			}
		}
	})
}

// Throttle charges every retry and repays a tenth of a token per success, so
// within a few iterations it sits at zero and measures its denying path.
func BenchmarkRetrySuccess(b *testing.B) {
	b.Run("TokenBucket", func(b *testing.B) {
		bud, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
		benchmarkRetrySuccess(b, bud)
	})
	b.Run("TokenBucketRefill", func(b *testing.B) {
		c := budget.DefaultTokenBucketConfig()
		c.RefillPerSecond = 10
		bud, _ := budget.NewTokenBucket(c)
		benchmarkRetrySuccess(b, bud)
	})
	// The least any linearizable shared balance can pay for a withdrawal and
	// a refund: two atomic read-modify-writes on one word, with no check and
	// no clamp. No budget in this run can beat it.
	b.Run("AtomicFloor", func(b *testing.B) {
		var word atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				word.Add(-14)
				word.Add(14)
			}
		})
	})
	// The same with compare-and-swap, which a balance that is checked
	// before it is withdrawn and clamped when it is refunded needs: the
	// least a correct single-word token bucket can pay.
	b.Run("CASFloor", func(b *testing.B) {
		var word atomic.Int64
		word.Store(1 << 40)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				for t := word.Load(); !word.CompareAndSwap(t, t-14); t = word.Load() {
				}
				for t := word.Load(); !word.CompareAndSwap(t, t+14); t = word.Load() {
				}
			}
		})
	})
	for _, slots := range []int{10, 1000} {
		b.Run("Ratio/slots="+itoa(slots), func(b *testing.B) {
			c := budget.DefaultRatioConfig()
			c.Slots = slots
			bud, _ := budget.NewRatio(c)
			benchmarkRetrySuccess(b, bud)
		})
	}
	b.Run("Throttle", func(b *testing.B) {
		bud, _ := budget.NewThrottle(10, 0.1)
		benchmarkRetrySuccess(b, bud)
	})
	// InFlight is also told of the ends, so that its retries leave flight
	// and it measures its granting path while under MinConcurrency.
	b.Run("InFlight", func(b *testing.B) {
		bud, _ := budget.NewInFlight(budget.DefaultInFlightConfig())
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bud.Request()
				bud.AttemptEnd(budget.FirstAttempt)
				if bud.Retry(budget.Transient) {
					bud.Success(budget.Transient)
					bud.AttemptEnd(budget.Transient)
				}
				bud.CallEnd()
			}
		})
	})
}

// BenchmarkHealthyTraffic models one call in a healthy service: nine in ten
// calls succeed at the first attempt, and one in ten fails once and succeeds
// at its retry. (awsbudget's BenchmarkHealthyTraffic measures the AWS SDK's
// quota under the same load, beside TokenBucket.)
func BenchmarkHealthyTraffic(b *testing.B) {
	b.Run("TokenBucket", func(b *testing.B) {
		bud, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i++
				bud.Request()
				if i%10 != 0 {
					bud.Success(budget.FirstAttempt)
				} else if bud.Retry(budget.Transient) {
					bud.Success(budget.Transient)
				}
			}
		})
	})
}

// BenchmarkRatioSlide moves a manual clock one slot width per iteration, so
// that every call expires a slot: the cost must not grow with the slot count.
func BenchmarkRatioSlide(b *testing.B) {
	for _, slots := range []int{10, 1000} {
		b.Run("slots="+itoa(slots), func(b *testing.B) {
			clock := new(budget.ManualClock)
			c := budget.DefaultRatioConfig()
			c.Slots, c.Clock = slots, clock
			bud, _ := budget.NewRatio(c)
			width := c.Window / time.Duration(slots)
			b.ReportAllocs()
			for b.Loop() {
				clock.Advance(width)
				bud.Request()
				bud.Retry(budget.Transient)
			}
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var buf [20]byte
	i := len(buf)
	for ; n > 0; n /= 10 {
		i--
		buf[i] = byte('0' + n%10)
	}
	return string(buf[i:])
}

// BenchmarkRetrierSuccess measures the retry loop's overhead on a call whose
// first attempt succeeds: Direct calls the operation alone, the others
// through a Retrier with no budget and with a shared TokenBucket.
func BenchmarkRetrierSuccess(b *testing.B) {
	ctx := context.Background()
	b.Run("Direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = okOp(ctx, budget.Attempt{})
		}
	})
	b.Run("NoBudget", func(b *testing.B) {
		r := &budget.Retrier{}
		b.ReportAllocs()
		for b.Loop() {
			_ = r.Do(ctx, okOp)
		}
	})
	b.Run("InFlight", func(b *testing.B) {
		bud, _ := budget.NewInFlight(budget.DefaultInFlightConfig())
		r := &budget.Retrier{Budget: bud}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = r.Do(ctx, okOp)
			}
		})
	})
	b.Run("TokenBucket", func(b *testing.B) {
		bud, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
		r := &budget.Retrier{Budget: bud}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = r.Do(ctx, okOp)
			}
		})
	})
}

// BenchmarkKeyedHit measures a keyed budget's hit path against a plain
// budget: each operation is a retry and its success on a TokenBucket,
// Plain on the bucket itself, Keyed after a Get of a key already held (one
// of 100), KeyedIdle the same with IdleTimeout, which reads the clock on
// every Get.
func BenchmarkKeyedHit(b *testing.B) {
	newTB := func(string) (*budget.TokenBucket, error) {
		return budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	}
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("service-%d.internal", i)
	}
	b.Run("Plain", func(b *testing.B) {
		tb, _ := newTB("")
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if tb.Retry(budget.Transient) {
					tb.Success(budget.Transient)
				}
			}
		})
	})
	for _, idle := range []time.Duration{0, time.Minute} {
		name := "Keyed"
		if idle > 0 {
			name = "KeyedIdle"
		}
		b.Run(name, func(b *testing.B) {
			k, _ := budget.NewKeyed(budget.KeyedConfig[string, *budget.TokenBucket]{New: newTB, IdleTimeout: idle})
			for _, key := range keys {
				_, _ = k.Get(key)
			}
			var next atomic.Uint64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				key := keys[next.Add(1)%uint64(len(keys))] // each goroutine its own key, as calls to one host
				for pb.Next() {
					tb, _ := k.Get(key)
					if tb.Retry(budget.Transient) {
						tb.Success(budget.Transient)
					}
				}
			})
		})
	}
}

package otelbudget_test

import (
	"context"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
)

// BenchmarkRetrier measures what the hooks add to a Retrier's call, with
// the OpenTelemetry SDK behind them: a call that succeeds at once (one
// attempt) and one that is retried once (two attempts and a retry), with
// no budget and no wait, so that the Retrier's own work is the least.
func BenchmarkRetrier(b *testing.B) {
	ops := []struct {
		name string
		op   func(context.Context, budget.Attempt) error
	}{
		{"Success", failing()},
		{"OneRetry", failing(errBoom)},
	}
	for _, op := range ops {
		for _, withHooks := range []bool{false, true} {
			name := op.name + "/NoHooks"
			r := &budget.Retrier{Jitter: every(0)}
			if withHooks {
				name = op.name + "/Hooks"
				meter, _ := newMeter(b)
				r.Hooks = newHooks(b, meter)
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				ctx := context.Background()
				for b.Loop() {
					if err := r.Do(ctx, op.op); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/Parallel", func(b *testing.B) {
				b.ReportAllocs()
				ctx := context.Background()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := r.Do(ctx, op.op); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

package instrumented_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"

	"github.com/retrybudget/retrybudget/budget"
	ibudget "github.com/retrybudget/retrybudget/internal/instrumented/budget"
)

// The retry/success loop of budget's BenchmarkRetrySuccess, on the plain
// TokenBucket, on the instrumented copy (outside a controlled run, where
// every hook is a load of the active run and a branch), and on the AWS
// SDK's retry quota, in one binary:
//
//	go test -run '^$' -bench Instrumented -cpu 1,2 ./internal/instrumented
func BenchmarkInstrumented(b *testing.B) {
	b.Run("TokenBucket", func(b *testing.B) {
		bud, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
		loop(b, bud.Request, bud.Retry, bud.Success)
	})
	b.Run("InstrumentedTokenBucket", func(b *testing.B) {
		bud, _ := ibudget.NewTokenBucket(ibudget.DefaultTokenBucketConfig())
		loop(b, bud.Request,
			func(budget.Kind) bool { return bud.Retry(ibudget.Transient) },
			func(budget.Kind) { bud.Success(ibudget.Transient) })
	})
	b.Run("AWSTokenRateLimit", func(b *testing.B) {
		rl := ratelimit.NewTokenRateLimit(500)
		ctx := context.Background()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				release, err := rl.GetToken(ctx, 14)
				if err == nil {
					_ = release()
				}
			}
		})
	})
}

func loop(b *testing.B, request func(), retry func(budget.Kind) bool, success func(budget.Kind)) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			request()
			if retry(budget.Transient) {
				success(budget.Transient)
			}
		}
	})
}

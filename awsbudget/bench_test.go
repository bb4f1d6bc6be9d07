package awsbudget_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"

	"github.com/retrybudget/retrybudget/awsbudget"
	"github.com/retrybudget/retrybudget/budget"
)

// The AWS SDK for Go v2's own retry quota beside budget.TokenBucket, and
// beside TokenBucket behind this package's adapter, in one binary, so that
// their ratios come from one run:
//
//	go test -run '^$' -bench . -cpu 1,2 ./...   (in awsbudget/)

// BenchmarkRetrySuccess is one granted retry and the success that gives
// its cost back, on a quota that stays full: each takes its granting path.
func BenchmarkRetrySuccess(b *testing.B) {
	ctx := context.Background()
	b.Run("TokenBucket", func(b *testing.B) {
		bud, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bud.Request()
				if bud.Retry(budget.Transient) {
					bud.Success(budget.Transient)
				}
			}
		})
	})
	// GetToken, then the release function it returns, as the SDK's
	// retryer does after a successful retry.
	getAndRelease := func(b *testing.B, rl interface {
		GetToken(context.Context, uint) (func() error, error)
	}) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if release, err := rl.GetToken(ctx, 14); err == nil {
					_ = release()
				}
			}
		})
	}
	b.Run("AWSTokenRateLimit", func(b *testing.B) { getAndRelease(b, ratelimit.NewTokenRateLimit(500)) })
	b.Run("AdapterTokenBucket", func(b *testing.B) {
		bud, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
		getAndRelease(b, awsbudget.New(bud))
	})
}

// BenchmarkHealthyTraffic is one call of a healthy service: nine in ten
// succeed at the first attempt, one in ten fails once and succeeds at its
// retry. For the SDK's quota that is what its standard retryer does: a
// first attempt that succeeds adds NoRetryIncrement (1), and a retry takes
// GetToken(14) and releases it when it succeeds.
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
	b.Run("AWSTokenRateLimit", func(b *testing.B) {
		rl := ratelimit.NewTokenRateLimit(500)
		ctx := context.Background()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i++
				if i%10 != 0 {
					_ = rl.AddTokens(1)
				} else if release, err := rl.GetToken(ctx, 14); err == nil {
					_ = release()
				}
			}
		})
	})
}

package grpcbudget_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/grpcbudget"
)

// A successful unary call costs the interceptor two allocations: the
// header and trailer that each attempt's grpc.Header and grpc.Trailer
// options fill in, and the call's options with those appended. The first
// attempt carries the caller's metadata as it is, at no cost: only a retry
// copies it to add grpc-previous-rpc-attempts.
func TestUnaryAllocs(t *testing.T) {
	tb, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	if err != nil {
		t.Fatal(err)
	}
	intercept := grpcbudget.UnaryClientInterceptor(&budget.Retrier{Budget: tb})
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	ctx := context.Background()
	opts := []grpc.CallOption{grpc.WaitForReady(true)}
	n := testing.AllocsPerRun(1000, func() {
		if err := intercept(ctx, "/m", nil, nil, nil, invoker, opts...); err != nil {
			t.Fatal(err)
		}
	})
	if n > 2 {
		t.Errorf("a successful call allocates %v times; want at most 2", n)
	}
}

package grpcbudget_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/grpcbudget"
)

// A successful unary call over bufconn, without the interceptor and with
// it: the difference is the interceptor's cost on the path most calls take.
func BenchmarkUnary(b *testing.B) {
	tb, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		opts []grpc.DialOption
	}{
		{"Plain", nil},
		{"Interceptor", []grpc.DialOption{grpc.WithUnaryInterceptor(grpcbudget.UnaryClientInterceptor(&budget.Retrier{Budget: tb}))}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			conn, _ := serve(b, always(step{}), bc.opts...)
			client := healthpb.NewHealthClient(conn)
			req := &healthpb.HealthCheckRequest{}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := client.Check(context.Background(), req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

package grpcbudget_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/grpcbudget"
)

// flakyHealth is a health server that fails its first call with
// UNAVAILABLE.
type flakyHealth struct {
	healthpb.UnimplementedHealthServer
	calls atomic.Int32
}

func (h *flakyHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.calls.Add(1) == 1 {
		return nil, status.Error(codes.Unavailable, "warming up")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (h *flakyHealth) Watch(_ *healthpb.HealthCheckRequest, ss grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	if h.calls.Add(1) == 1 {
		return status.Error(codes.Unavailable, "warming up")
	}
	return ss.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

// startFlaky serves a flakyHealth on an in-memory listener, and returns a
// dial option that reaches it and a func that stops it.
func startFlaky() (*flakyHealth, grpc.DialOption, func()) {
	h := &flakyHealth{}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, h)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	dial := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })
	return h, dial, func() { srv.Stop(); <-served }
}

// Retry unary calls under a token bucket shared by every call to one
// dependency: the server's first answer, UNAVAILABLE, is retried.
func ExampleUnaryClientInterceptor() {
	h, dial, stop := startFlaky()
	defer stop()

	tb, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	if err != nil {
		panic(err)
	}
	conn, err := grpc.NewClient("passthrough:///health", dial,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(grpcbudget.UnaryClientInterceptor(&budget.Retrier{Budget: tb})))
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println(resp.GetStatus(), err, "after", h.calls.Load(), "calls")
	fmt.Println("tokens left:", tb.Available()) // 14 charged for the retry, refunded by its success
	// Output:
	// SERVING <nil> after 2 calls
	// tokens left: 500
}

// Retry a server-streaming call that fails before its first message.
func ExampleStreamClientInterceptor() {
	h, dial, stop := startFlaky()
	defer stop()

	throttle, err := budget.NewThrottle(10, 0.1) // gRPC's retry throttling
	if err != nil {
		panic(err)
	}
	r := &budget.Retrier{Budget: throttle}
	conn, err := grpc.NewClient("passthrough:///health", dial,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStreamInterceptor(grpcbudget.StreamClientInterceptor(r)))
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		panic(err)
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			fmt.Println(err, "after", h.calls.Load(), "calls")
			break
		}
		fmt.Println(resp.GetStatus())
	}
	// Output:
	// SERVING
	// EOF after 2 calls
}

// Retry ABORTED too, as a transient failure, and never RESOURCE_EXHAUSTED.
func ExampleWithCodes() {
	intercept := grpcbudget.UnaryClientInterceptor(&budget.Retrier{},
		grpcbudget.WithCodes(budget.Transient, codes.Aborted),
		grpcbudget.WithCodes(budget.FirstAttempt, codes.ResourceExhausted))
	for _, code := range []codes.Code{codes.Aborted, codes.ResourceExhausted} {
		attempts := 0
		err := intercept(context.Background(), "/m", nil, nil, nil,
			func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
				attempts++
				if attempts == 1 {
					return status.Error(code, "try again")
				}
				return nil
			})
		fmt.Println(code, err, attempts)
	}
	// Output:
	// Aborted <nil> 2
	// ResourceExhausted rpc error: code = ResourceExhausted desc = try again 1
}

// upTo is a team's own retry loop, written against budget.Loop and
// nothing else of the budget package's: up to n attempts, no wait, no
// budget. It reads each failure as the interceptors tell it: the verdict
// from budget.DefaultClassifier, the code from status.Code.
type upTo int

func (n upTo) Do(ctx context.Context, op func(context.Context, budget.Attempt) error) error {
	for a := 1; ; a++ {
		err := op(ctx, budget.Attempt{N: a})
		if err == nil {
			return nil
		}
		kind, retry := budget.DefaultClassifier(err)
		fmt.Printf("attempt %d: %v, retry: %v (%v)\n", a, status.Code(err), retry, kind)
		if !retry || a == int(n) {
			return err
		}
	}
}

// Retry under a loop of your own: the interceptor tells it which codes
// are failures to retry, and as which kind.
func ExampleUnaryClientInterceptor_ownLoop() {
	intercept := grpcbudget.UnaryClientInterceptor(upTo(3))
	attempts := 0
	err := intercept(context.Background(), "/m", nil, nil, nil,
		func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			attempts++
			switch attempts {
			case 1:
				return status.Error(codes.Unavailable, "warming up")
			case 2:
				return status.Error(codes.ResourceExhausted, "slow down")
			}
			return status.Error(codes.InvalidArgument, "bad request")
		})
	fmt.Println(err)
	// Output:
	// attempt 1: Unavailable, retry: true (transient)
	// attempt 2: ResourceExhausted, retry: true (throttled)
	// attempt 3: InvalidArgument, retry: false (first)
	// rpc error: code = InvalidArgument desc = bad request
}

// Keep a budget per destination, so that one sick backend does not spend
// the retries of the others.
func ExampleWithBudgetFor() {
	var budgets sync.Map // target → budget.Budget
	perTarget := func(_ context.Context, _ string, cc *grpc.ClientConn) (budget.Budget, error) {
		if b, ok := budgets.Load(cc.Target()); ok {
			return b.(budget.Budget), nil
		}
		tb, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
		if err != nil {
			return nil, err
		}
		b, _ := budgets.LoadOrStore(cc.Target(), tb)
		return b.(budget.Budget), nil
	}
	_ = grpc.WithUnaryInterceptor(grpcbudget.UnaryClientInterceptor(&budget.Retrier{}, grpcbudget.WithBudgetFor(perTarget)))
}

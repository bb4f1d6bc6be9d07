package grpcbudget_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/grpcbudget"
)

// grpcThrottling is a service config with grpc-go's own retry of
// UNAVAILABLE, 3 attempts with a 1ms backoff, and its retry throttling
// with gRFC A6's example numbers: 10 tokens, 0.1 per success.
const grpcThrottling = `{
	"methodConfig": [{
		"name": [{"service": "grpc.health.v1.Health"}],
		"retryPolicy": {
			"maxAttempts": 3,
			"initialBackoff": "0.001s",
			"maxBackoff": "0.001s",
			"backoffMultiplier": 1,
			"retryableStatusCodes": ["UNAVAILABLE"]
		}
	}],
	"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
}`

// attemptsPerCall makes one call for each step of calls, in order, over
// one connection to a server that does what each step says, and returns
// how many attempts the server saw in each call. A call is a unary Check,
// or with stream a Watch whose first message is awaited.
func attemptsPerCall(t *testing.T, stream bool, calls []step, opts ...grpc.DialOption) []int {
	t.Helper()
	var script []step // what the server does in its n-th call
	var counts []int
	conn, srv := serve(t, func(n int) step {
		if n <= len(script) {
			return script[n-1]
		}
		return step{code: codes.Internal} // never reached: each call's steps are set before it is made
	}, opts...)
	client := healthpb.NewHealthClient(conn)
	for _, s := range calls {
		before := len(srv.Calls())
		// Every attempt of this call does s: at most 3 attempts.
		script = append(script[:before:before], s, s, s)
		if stream {
			if w, err := client.Watch(context.Background(), &healthpb.HealthCheckRequest{}); err == nil {
				_, _ = w.Recv()
			}
		} else {
			_, _ = client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		}
		counts = append(counts, len(srv.Calls())-before)
	}
	return counts
}

// The interceptor with a budget.Throttle spends the tokens grpc-go's own
// retry throttling spends, on the same calls: the last attempt's failure
// (gRFC A6, "Throttling": every failed attempt with a retryable status
// takes a token, one after which attempts ran out too), and a failure the
// server forbade to retry with a negative or malformed pushback, whatever
// its code. Each case's calls are made in order on one connection, with
// grpc-go's throttling on one and a Throttle(10, 0.1) behind the
// interceptor on another; the attempts of each call must agree.
func TestThrottleSpendsAsGRPC(t *testing.T) {
	unavailable := step{code: codes.Unavailable}
	for _, tt := range []struct {
		name  string
		calls []step
		want  []int // attempts per call, as grpc-go makes them
	}{
		{
			// 10 → 9, 8 (retried), 7 (attempts run out); → 6, 5 (not
			// above 5: throttled); → 4; → 3.
			name:  "the last attempt's failure counts",
			calls: []step{unavailable, unavailable, unavailable, unavailable},
			want:  []int{3, 2, 1, 1},
		},
		{
			// Five pushbacks that forbid a retry: 10 → 5. Then an
			// UNAVAILABLE takes 5 → 4 and is throttled.
			name: "a do-not-retry pushback counts",
			calls: []step{
				{code: codes.Unavailable, pushback: "-1"},
				{code: codes.Unavailable, pushback: "soon"},
				{code: codes.Unavailable, pushback: "-30"},
				{code: codes.Unavailable, pushback: "-1"},
				{code: codes.Unavailable, pushback: "1.5"},
				unavailable,
			},
			want: []int{1, 1, 1, 1, 1, 1},
		},
		{
			// grpc-go reads the pushback before the code: a forbidding
			// pushback counts on a code it never retries.
			name: "a do-not-retry pushback counts whatever the code",
			calls: []step{
				{code: codes.Internal, pushback: "-1"},
				{code: codes.InvalidArgument, pushback: "-1"},
				{code: codes.Internal, pushback: "-1"},
				{code: codes.Internal, pushback: "-1"},
				{code: codes.Internal, pushback: "-1"},
				unavailable,
			},
			want: []int{1, 1, 1, 1, 1, 1},
		},
		{
			// A pushback that allows a retry is an ordinary failure:
			// 10 → 9, 8, 7 as in the first case.
			name:  "an allowing pushback is a plain failure",
			calls: []step{{code: codes.Unavailable, pushback: "0"}, unavailable, unavailable},
			want:  []int{3, 2, 1},
		},
	} {
		for _, stream := range []bool{false, true} {
			name := tt.name + "/unary"
			if stream {
				name = tt.name + "/stream"
			}
			t.Run(name, func(t *testing.T) {
				own := attemptsPerCall(t, stream, tt.calls, grpc.WithDefaultServiceConfig(grpcThrottling))
				if !slices.Equal(own, tt.want) {
					t.Fatalf("grpc-go's own retry made %v attempts; the test expects %v", own, tt.want)
				}
				throttle, err := budget.NewThrottle(10, 0.1)
				if err != nil {
					t.Fatal(err)
				}
				got := attemptsPerCall(t, stream, tt.calls, grpc.WithDisableRetry(),
					grpc.WithUnaryInterceptor(grpcbudget.UnaryClientInterceptor(quick(throttle))),
					grpc.WithStreamInterceptor(grpcbudget.StreamClientInterceptor(quick(throttle))))
				if !slices.Equal(got, own) {
					t.Errorf("with the interceptor and a Throttle(10, 0.1): %v attempts per call; grpc-go's own retry throttling made %v (tokens left: %v)",
						got, own, throttle.Available())
				}
			})
		}
	}
}

// A budget that does not count failures is told nothing of the failures
// the interceptor does not retry: a do-not-retry pushback asks it no
// retry, and a recorder sees one Request and nothing else.
func TestPushbackStopsPlainBudget(t *testing.T) {
	for _, code := range []codes.Code{codes.Unavailable, codes.Internal} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			b := &recorder{}
			srv, err := check(t, context.Background(), always(step{code: code, pushback: "-1"}), quick(b))
			if err == nil || len(srv.Calls()) != 1 {
				t.Errorf("Check() = %v after %d attempts; want the failure after 1", err, len(srv.Calls()))
			}
			b.check(t, 1, nil, nil)
		})
	}
}

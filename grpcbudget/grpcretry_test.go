package grpcbudget_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/grpcbudget"
)

// The tests in this file hold the interceptors to the rules of gRFC A6
// (gRPC client-side retries) side by side with grpc-go's own retry policy,
// which follows them.

// retryPolicy is a service config that has grpc-go retry the health
// service's calls itself: up to 3 attempts, UNAVAILABLE retried, after at
// most a millisecond.
const retryPolicy = `{"methodConfig": [{
	"name": [{"service": "grpc.health.v1.Health"}],
	"retryPolicy": {
		"maxAttempts": 3,
		"initialBackoff": "0.001s",
		"maxBackoff": "0.001s",
		"backoffMultiplier": 1,
		"retryableStatusCodes": ["UNAVAILABLE"]
	}
}]}`

// A retrier is a way for a client to retry its calls: its name and the
// dial options that set it up.
type retrier struct {
	name string
	opts []grpc.DialOption
}

// retriers returns the interceptors, over budget b, and grpc-go's own
// retry policy, each up to 3 attempts.
func retriers(b budget.Budget) []retrier {
	r := quick(b)
	return []retrier{
		{"Interceptors", []grpc.DialOption{
			grpc.WithUnaryInterceptor(grpcbudget.UnaryClientInterceptor(r)),
			grpc.WithStreamInterceptor(grpcbudget.StreamClientInterceptor(r)),
		}},
		{"GRPCRetry", []grpc.DialOption{grpc.WithDefaultServiceConfig(retryPolicy)}},
	}
}

// rpcs are the calls compared: do makes one over conn, and returns nil
// for a success, a Check's response or a Watch's one message.
var rpcs = []struct {
	name string
	do   func(ctx context.Context, conn *grpc.ClientConn) error
}{
	{"Unary", func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}},
	{"Stream", func(ctx context.Context, conn *grpc.ClientConn) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		switch n, err := recvAll(st); {
		case err != io.EOF:
			return err
		case n != 1:
			return fmt.Errorf("stream ended after %d messages; want 1", n)
		}
		return nil
	}},
}

// An attempt that fails after the response's header arrived is not
// retried: the call is committed (gRFC A6, "When Retries are Valid"). One
// that fails with a trailers-only response is retried. The interceptors
// make as many attempts as grpc-go's retry.
func TestCommitted(t *testing.T) {
	for _, c := range rpcs {
		for _, tt := range []struct {
			name      string
			s         step // the first two calls'; the third succeeds
			calls     int
			code      codes.Code
			retries   []budget.Kind // what the interceptors' budget is told
			successes []budget.Kind
		}{
			// The handler sends its header (grpc.SendHeader), then
			// returns UNAVAILABLE.
			{"HeaderThenUnavailable", step{code: codes.Unavailable, header: true}, 1, codes.Unavailable, nil, nil},
			{"TrailersOnlyUnavailable", step{code: codes.Unavailable}, 3, codes.OK,
				[]budget.Kind{budget.Transient, budget.Transient}, []budget.Kind{budget.Transient}},
		} {
			t.Run(c.name+"/"+tt.name, func(t *testing.T) {
				b := &recorder{}
				calls := map[string]int{}
				for _, rt := range retriers(b) {
					conn, srv := serve(t, fails(2, tt.s), rt.opts...)
					if err := c.do(context.Background(), conn); status.Code(err) != tt.code {
						t.Errorf("%s: %s call = %v; want code %v", rt.name, c.name, err, tt.code)
					}
					calls[rt.name] = len(srv.Calls())
				}
				if calls["Interceptors"] != tt.calls || calls["GRPCRetry"] != tt.calls {
					t.Errorf("server saw %d calls under the interceptors, %d under grpc-go's retry; want %d under both",
						calls["Interceptors"], calls["GRPCRetry"], tt.calls)
				}
				b.check(t, 1, tt.retries, tt.successes)
			})
		}
	}
}

// Each retry carries the request header grpc-previous-rpc-attempts, the
// number of attempts before it (gRFC A6, "Exposed Retry Metadata"), as
// grpc-go's retry sends it; the first attempt carries none.
func TestPreviousAttempts(t *testing.T) {
	want := [][]string{nil, {"1"}, {"2"}}
	for _, c := range rpcs {
		t.Run(c.name, func(t *testing.T) {
			sent := map[string][][]string{}
			for _, rt := range retriers(nil) {
				conn, srv := serve(t, fails(2, step{code: codes.Unavailable}), rt.opts...)
				if err := c.do(context.Background(), conn); err != nil {
					t.Errorf("%s: %s call = %v; want success on the third attempt", rt.name, c.name, err)
				}
				sent[rt.name], _ = srv.Metadata()
			}
			for name, got := range sent {
				if !slices.EqualFunc(got, want, slices.Equal) {
					t.Errorf("%s: server saw grpc-previous-rpc-attempts %q; want %q", name, got, want)
				}
			}
		})
	}
}

// A grpc-previous-rpc-attempts in the caller's outgoing metadata goes with
// the first attempt, as the rest of the caller's metadata does, and each
// retry replaces it with its own; the rest goes with every attempt.
func TestPreviousAttemptsReplaced(t *testing.T) {
	for _, c := range rpcs {
		t.Run(c.name, func(t *testing.T) {
			conn, srv := serve(t, fails(2, step{code: codes.Unavailable}), retriers(nil)[0].opts...)
			ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs("grpc-previous-rpc-attempts", "9", "tag", "a"))
			ctx = metadata.AppendToOutgoingContext(ctx, "Grpc-Previous-Rpc-Attempts", "7", "tag", "b")
			if err := c.do(ctx, conn); err != nil {
				t.Fatalf("%s call = %v; want success on the third attempt", c.name, err)
			}
			previous, tags := srv.Metadata()
			if want := [][]string{{"9", "7"}, {"1"}, {"2"}}; !slices.EqualFunc(previous, want, slices.Equal) {
				t.Errorf("server saw grpc-previous-rpc-attempts %q; want %q", previous, want)
			}
			if want := [][]string{{"a", "b"}, {"a", "b"}, {"a", "b"}}; !slices.EqualFunc(tags, want, slices.Equal) {
				t.Errorf("server saw tag %q; want %q", tags, want)
			}
		})
	}
}

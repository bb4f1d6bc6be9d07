package grpcbudget_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/grpcbudget"
)

// check makes one Check call over a connection to a server that runs
// script, with the unary interceptor of l and opts.
func check(t *testing.T, ctx context.Context, script func(int) step, l budget.Loop, opts ...grpcbudget.Option) (*server, error) {
	t.Helper()
	conn, srv := serve(t, script, grpc.WithUnaryInterceptor(grpcbudget.UnaryClientInterceptor(l, opts...)))
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Check() = %v; want SERVING", resp)
	}
	return srv, err
}

func TestUnaryRetried(t *testing.T) {
	for _, tt := range []struct {
		name string
		code codes.Code
		kind budget.Kind
	}{
		{"Unavailable", codes.Unavailable, budget.Transient},
		{"ResourceExhausted", codes.ResourceExhausted, budget.Throttled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := &recorder{}
			srv, err := check(t, context.Background(), fails(1, step{code: tt.code}), quick(b))
			if err != nil {
				t.Fatalf("Check() = %v; want success on the retry", err)
			}
			if n := len(srv.Calls()); n != 2 {
				t.Errorf("server saw %d calls; want 2", n)
			}
			b.check(t, 1, []budget.Kind{tt.kind}, []budget.Kind{tt.kind})
		})
	}
}

func TestUnaryNotRetried(t *testing.T) {
	for _, code := range []codes.Code{codes.InvalidArgument, codes.Internal, codes.Unknown, codes.NotFound,
		codes.Unimplemented, codes.PermissionDenied, codes.Canceled, codes.DeadlineExceeded, codes.Aborted} {
		t.Run(code.String(), func(t *testing.T) {
			b := &recorder{}
			srv, err := check(t, context.Background(), always(step{code: code}), quick(b))
			if got := status.Code(err); got != code {
				t.Errorf("Check() = %v; want code %v", err, code)
			}
			// The invoker's own error, unwrapped.
			if s, ok := err.(interface{ GRPCStatus() *status.Status }); !ok || s.GRPCStatus().Message() != "step "+code.String() {
				t.Errorf("Check() = %#v; want the server's status error itself", err)
			}
			if n := len(srv.Calls()); n != 1 {
				t.Errorf("server saw %d calls; want 1", n)
			}
			b.check(t, 1, nil, nil)
		})
	}
}

func TestUnaryPushbackDelays(t *testing.T) {
	for _, tt := range []struct {
		name string
		code codes.Code
		kind budget.Kind
	}{
		{"ResourceExhausted", codes.ResourceExhausted, budget.Throttled},
		{"Unavailable", codes.Unavailable, budget.Transient},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := &recorder{}
			// A backoff of at most 1ns: any wait is the server's.
			r := &budget.Retrier{Budget: b, BaseDelay: time.Nanosecond}
			srv, err := check(t, context.Background(), fails(1, step{code: tt.code, pushback: "30"}), r)
			if err != nil {
				t.Fatalf("Check() = %v; want success on the retry", err)
			}
			calls := srv.Calls()
			if len(calls) != 2 {
				t.Fatalf("server saw %d calls; want 2", len(calls))
			}
			if gap := calls[1].Sub(calls[0]); gap < 30*time.Millisecond {
				t.Errorf("retry %v after the first attempt; want at least the pushback, 30ms", gap)
			}
			b.check(t, 1, []budget.Kind{tt.kind}, []budget.Kind{tt.kind})
		})
	}
	t.Run("Zero", func(t *testing.T) {
		b := &recorder{}
		srv, err := check(t, context.Background(), fails(1, step{code: codes.Unavailable, pushback: "0"}), &budget.Retrier{Budget: b, BaseDelay: time.Hour})
		if err != nil || len(srv.Calls()) != 2 {
			t.Errorf("Check() = %v after %d calls; want success on the retry, at once despite a BaseDelay of 1h", err, len(srv.Calls()))
		}
	})
}

func TestUnaryPushbackStops(t *testing.T) {
	for _, pushback := range []string{"-1", "-30", "soon", "1.5", "30ms"} {
		t.Run(pushback, func(t *testing.T) {
			b := &recorder{}
			srv, err := check(t, context.Background(), fails(1, step{code: codes.ResourceExhausted, pushback: pushback}), quick(b))
			if status.Code(err) != codes.ResourceExhausted {
				t.Errorf("Check() = %v; want the RESOURCE_EXHAUSTED, not retried", err)
			}
			if n := len(srv.Calls()); n != 1 {
				t.Errorf("server saw %d calls; want 1", n)
			}
			b.check(t, 1, nil, nil)
		})
	}
}

func TestUnaryDenied(t *testing.T) {
	b := &recorder{deny: true}
	srv, err := check(t, context.Background(), always(step{code: codes.Unavailable}), quick(b))
	if !errors.Is(err, budget.ErrDenied) || status.Code(err) != codes.Unavailable {
		t.Errorf("Check() = %v; want UNAVAILABLE wrapped with budget.ErrDenied", err)
	}
	if n := len(srv.Calls()); n != 1 {
		t.Errorf("server saw %d calls; want 1", n)
	}
	b.check(t, 1, []budget.Kind{budget.Transient}, nil)
}

func TestUnaryOutOfAttempts(t *testing.T) {
	r := quick(nil)
	r.MaxAttempts = 2
	srv, err := check(t, context.Background(), always(step{code: codes.Unavailable}), r)
	if !errors.Is(err, budget.ErrAttempts) || status.Code(err) != codes.Unavailable {
		t.Errorf("Check() = %v; want UNAVAILABLE wrapped with budget.ErrAttempts", err)
	}
	if n := len(srv.Calls()); n != 2 {
		t.Errorf("server saw %d calls; want 2", n)
	}
}

// A wait that would pass the deadline ends the call at once.
func TestUnaryNoTimeForPushback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	srv, err := check(t, ctx, always(step{code: codes.Unavailable, pushback: "60000"}), quick(nil))
	if !errors.Is(err, budget.ErrNoTime) || status.Code(err) != codes.Unavailable {
		t.Errorf("Check() = %v; want UNAVAILABLE wrapped with budget.ErrNoTime", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Check() took %v; want a return at once", took)
	}
	if n := len(srv.Calls()); n != 1 {
		t.Errorf("server saw %d calls; want 1", n)
	}
}

func TestUnaryCancel(t *testing.T) {
	for _, tt := range []struct {
		name string
		s    step
	}{
		// The server asks for an hour's wait: the call is waiting to retry.
		{"DuringWait", step{code: codes.Unavailable, pushback: "3600000"}},
		{"DuringAttempt", step{block: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			conn, srv := serve(t, always(tt.s), grpc.WithUnaryInterceptor(grpcbudget.UnaryClientInterceptor(&budget.Retrier{MaxDelay: 2 * time.Hour})))
			done := make(chan error, 1)
			go func() {
				_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
				done <- err
			}()
			waitCalls(t, srv, 1)
			time.Sleep(20 * time.Millisecond)
			cancel()
			select {
			case err := <-done:
				if status.Code(err) != codes.Canceled || !errors.Is(err, context.Canceled) {
					t.Errorf("Check() = %v after a cancel; want CANCELLED, wrapping context.Canceled", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Check() still running 10s after a cancel")
			}
			if n := len(srv.Calls()); n != 1 {
				t.Errorf("server saw %d calls; want 1", n)
			}
		})
	}
	t.Run("Before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		srv, err := check(t, ctx, always(step{}), nil)
		if status.Code(err) != codes.Canceled || !errors.Is(err, context.Canceled) {
			t.Errorf("Check() = %v on a cancelled context; want CANCELLED, wrapping context.Canceled", err)
		}
		if n := len(srv.Calls()); n != 0 {
			t.Errorf("server saw %d calls; want none", n)
		}
	})
}

func TestWithCodes(t *testing.T) {
	t.Run("Added", func(t *testing.T) {
		b := &recorder{}
		srv, err := check(t, context.Background(), fails(1, step{code: codes.Aborted}), quick(b), grpcbudget.WithCodes(budget.Transient, codes.Aborted))
		if err != nil || len(srv.Calls()) != 2 {
			t.Errorf("Check() = %v after %d calls; want success on the retry", err, len(srv.Calls()))
		}
		b.check(t, 1, []budget.Kind{budget.Transient}, []budget.Kind{budget.Transient})
	})
	t.Run("Removed", func(t *testing.T) {
		srv, err := check(t, context.Background(), fails(1, step{code: codes.Unavailable}), quick(nil), grpcbudget.WithCodes(budget.FirstAttempt, codes.Unavailable))
		if status.Code(err) != codes.Unavailable || len(srv.Calls()) != 1 {
			t.Errorf("Check() = %v after %d calls; want UNAVAILABLE after 1", err, len(srv.Calls()))
		}
	})
	t.Run("Reclassified", func(t *testing.T) {
		b := &recorder{}
		_, err := check(t, context.Background(), fails(1, step{code: codes.Unavailable}), quick(b), grpcbudget.WithCodes(budget.Throttled, codes.Unavailable))
		if err != nil {
			t.Errorf("Check() = %v; want success on the retry", err)
		}
		b.check(t, 1, []budget.Kind{budget.Throttled}, []budget.Kind{budget.Throttled})
	})
}

func TestWithBudgetFor(t *testing.T) {
	own, picked := &recorder{}, &recorder{}
	var methods []string
	pick := func(_ context.Context, method string, cc *grpc.ClientConn) (budget.Budget, error) {
		methods = append(methods, method+" "+cc.Target())
		switch len(methods) {
		case 1:
			return picked, nil
		case 2:
			return nil, nil // the Retrier's own
		}
		return nil, status.Error(codes.FailedPrecondition, "no budget")
	}
	conn, srv := serve(t, fails(1, step{code: codes.Unavailable}), grpc.WithUnaryInterceptor(grpcbudget.UnaryClientInterceptor(quick(own), grpcbudget.WithBudgetFor(pick))))
	client := healthpb.NewHealthClient(conn)
	for range 2 {
		if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("Check() = %v; want success", err)
		}
	}
	picked.check(t, 1, []budget.Kind{budget.Transient}, []budget.Kind{budget.Transient})
	own.check(t, 1, nil, []budget.Kind{budget.FirstAttempt})
	if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Check() = %v; want the pick's error", err)
	}
	if n := len(srv.Calls()); n != 3 {
		t.Errorf("server saw %d calls; want 3", n)
	}
	if want := "/grpc.health.v1.Health/Check passthrough:///bufnet"; methods[0] != want {
		t.Errorf("pick called with %q; want %q", methods[0], want)
	}
}

// The caller's own Trailer option still sees the last attempt's trailer.
func TestUnaryCallersTrailer(t *testing.T) {
	conn, _ := serve(t, fails(1, step{code: codes.Unavailable, pushback: "1"}), grpc.WithUnaryInterceptor(grpcbudget.UnaryClientInterceptor(quick(nil))))
	md := metadata.Pairs("stale", "yes")
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&md)); err != nil {
		t.Fatal(err)
	}
	if v := md.Get(grpcbudget.PushbackKey); len(v) != 0 || md.Get("stale") != nil {
		t.Errorf("caller's trailer = %v; want the successful attempt's, without pushback", md)
	}
}

// The caller's own Header option is left with the last attempt's header,
// from the server's success after a trailers-only failure, and from a
// failure after the header, which is not retried.
func TestUnaryCallersHeader(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script func(int) step
		code   codes.Code
		calls  int
	}{
		{"RetriedToSuccess", func(n int) step {
			if n == 1 {
				return step{code: codes.Unavailable}
			}
			return step{header: true}
		}, codes.OK, 2},
		{"Committed", always(step{code: codes.Unavailable, header: true}), codes.Unavailable, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, srv := serve(t, tt.script, grpc.WithUnaryInterceptor(grpcbudget.UnaryClientInterceptor(quick(nil))))
			md := metadata.Pairs("stale", "yes")
			_, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&md))
			if status.Code(err) != tt.code || len(srv.Calls()) != tt.calls {
				t.Errorf("Check() = %v after %d calls; want code %v after %d", err, len(srv.Calls()), tt.code, tt.calls)
			}
			if !slices.Equal(md.Get("step"), []string{"header"}) || md.Get("stale") != nil {
				t.Errorf("caller's header = %v; want the last attempt's, with step: header", md)
			}
		})
	}
}

// Call options apply to each attempt.
func TestUnaryOnFinishPerAttempt(t *testing.T) {
	conn, _ := serve(t, fails(1, step{code: codes.Unavailable}), grpc.WithUnaryInterceptor(grpcbudget.UnaryClientInterceptor(quick(nil))))
	var finished []codes.Code
	onFinish := grpc.OnFinish(func(err error) { finished = append(finished, status.Code(err)) })
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}, onFinish); err != nil {
		t.Fatal(err)
	}
	if want := []codes.Code{codes.Unavailable, codes.OK}; !slices.Equal(finished, want) {
		t.Errorf("OnFinish saw %v; want %v", finished, want)
	}
}

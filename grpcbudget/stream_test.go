package grpcbudget_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/grpcbudget"
)

// attempts is a stream interceptor, inside the one under test, that
// records the context of each stream it opens, and fails the first fail
// stream opens with failWith.
type attempts struct {
	fail     int
	failWith error

	mu   sync.Mutex
	ctxs []context.Context
}

func (a *attempts) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	a.mu.Lock()
	a.ctxs = append(a.ctxs, ctx)
	n := len(a.ctxs)
	a.mu.Unlock()
	if n <= a.fail {
		return nil, a.failWith
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// ended fails t unless n streams were opened, and each one's context has
// ended.
func (a *attempts) ended(t *testing.T, n int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.ctxs) != n {
		t.Errorf("%d streams opened; want %d", len(a.ctxs), n)
	}
	for i, ctx := range a.ctxs {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Errorf("stream %d's context still live 10s after the call ended", i+1)
		}
	}
}

// watch opens a Watch stream to a server that runs script, with the stream
// interceptor of l, the attempts recorder inside it.
func watch(t *testing.T, ctx context.Context, script func(int) step, l budget.Loop, a *attempts) (grpc.ServerStreamingClient[healthpb.HealthCheckResponse], *server) {
	t.Helper()
	conn, srv := serve(t, script, grpc.WithChainStreamInterceptor(grpcbudget.StreamClientInterceptor(l), a.intercept))
	st, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: "s"})
	if err != nil {
		t.Fatalf("Watch() = %v; want a stream", err)
	}
	return st, srv
}

// recvAll receives until an error, and returns the number of messages and
// the error.
func recvAll(st grpc.ServerStreamingClient[healthpb.HealthCheckResponse]) (int, error) {
	for n := 0; ; n++ {
		m, err := st.Recv()
		if err != nil {
			return n, err
		}
		if m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return n, errors.New("bad message")
		}
	}
}

func TestStreamRetriedBeforeFirstMessage(t *testing.T) {
	for _, tt := range []struct {
		name string
		s    step
		kind budget.Kind
	}{
		{"Unavailable", step{code: codes.Unavailable}, budget.Transient},
		{"ResourceExhausted", step{code: codes.ResourceExhausted}, budget.Throttled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, a := &recorder{}, &attempts{}
			st, srv := watch(t, context.Background(), fails(2, tt.s), quick(b), a)
			n, err := recvAll(st)
			if n != 1 || err != io.EOF {
				t.Errorf("Recv() gave %d messages, then %v; want 1, then io.EOF", n, err)
			}
			if n := len(srv.Calls()); n != 3 {
				t.Errorf("server saw %d calls; want 3", n)
			}
			b.check(t, 1, []budget.Kind{tt.kind, tt.kind}, []budget.Kind{tt.kind})
			a.ended(t, 3)
		})
	}
}

func TestStreamNotRetriedAfterResponse(t *testing.T) {
	for _, tt := range []struct {
		name      string
		s         step
		msgs      int
		successes []budget.Kind
	}{
		// The first message is the attempt's success.
		{"Message", step{code: codes.Unavailable, sends: 1}, 1, []budget.Kind{budget.FirstAttempt}},
		{"Messages", step{code: codes.Unavailable, sends: 3}, 3, []budget.Kind{budget.FirstAttempt}},
		// A header alone is no success, but the response has begun.
		{"Header", step{code: codes.Unavailable, header: true}, 0, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, a := &recorder{}, &attempts{}
			st, srv := watch(t, context.Background(), fails(1, tt.s), quick(b), a)
			n, err := recvAll(st)
			if n != tt.msgs || status.Code(err) != codes.Unavailable {
				t.Errorf("Recv() gave %d messages, then %v; want %d, then UNAVAILABLE", n, err, tt.msgs)
			}
			if n := len(srv.Calls()); n != 1 {
				t.Errorf("server saw %d calls; want 1", n)
			}
			b.check(t, 1, nil, tt.successes)
			a.ended(t, 1)
		})
	}
}

func TestStreamNotRetried(t *testing.T) {
	b, a := &recorder{}, &attempts{}
	st, srv := watch(t, context.Background(), always(step{code: codes.InvalidArgument}), quick(b), a)
	n, err := recvAll(st)
	if n != 0 || status.Code(err) != codes.InvalidArgument {
		t.Errorf("Recv() gave %d messages, then %v; want none, then INVALID_ARGUMENT", n, err)
	}
	if _, err2 := st.Recv(); err2 != err {
		t.Errorf("Recv() again = %v; want %v again", err2, err)
	}
	if n := len(srv.Calls()); n != 1 {
		t.Errorf("server saw %d calls; want 1", n)
	}
	b.check(t, 1, nil, nil)
	a.ended(t, 1)
}

func TestStreamEmpty(t *testing.T) {
	b, a := &recorder{}, &attempts{}
	st, srv := watch(t, context.Background(), always(step{}), quick(b), a)
	if n, err := recvAll(st); n != 0 || err != io.EOF {
		t.Errorf("Recv() gave %d messages, then %v; want none, then io.EOF", n, err)
	}
	if n := len(srv.Calls()); n != 1 {
		t.Errorf("server saw %d calls; want 1", n)
	}
	b.check(t, 1, nil, []budget.Kind{budget.FirstAttempt})
	a.ended(t, 1)
}

func TestStreamHeaderFirst(t *testing.T) {
	t.Run("Retried", func(t *testing.T) {
		a := &attempts{}
		st, srv := watch(t, context.Background(), func(n int) step {
			if n == 1 {
				return step{code: codes.Unavailable}
			}
			return step{header: true, sends: 1}
		}, quick(nil), a)
		md, err := st.Header()
		if err != nil || !slices.Equal(md.Get("step"), []string{"header"}) {
			t.Errorf("Header() = %v, %v; want the second attempt's header", md, err)
		}
		if n, err := recvAll(st); n != 1 || err != io.EOF {
			t.Errorf("Recv() gave %d messages, then %v; want 1, then io.EOF", n, err)
		}
		if n := len(srv.Calls()); n != 2 {
			t.Errorf("server saw %d calls; want 2", n)
		}
		a.ended(t, 2)
	})
	t.Run("GivesUp", func(t *testing.T) {
		a := &attempts{}
		st, srv := watch(t, context.Background(), always(step{code: codes.Unavailable}), &budget.Retrier{MaxAttempts: 2, BaseDelay: time.Millisecond}, a)
		// As grpc does: no header and no error; RecvMsg tells why.
		if md, err := st.Header(); md != nil || err != nil {
			t.Errorf("Header() = %v, %v; want nil, nil", md, err)
		}
		if _, err := st.Recv(); status.Code(err) != codes.Unavailable || !errors.Is(err, budget.ErrAttempts) {
			t.Errorf("Recv() = %v; want UNAVAILABLE wrapped with budget.ErrAttempts", err)
		}
		if n := len(srv.Calls()); n != 2 {
			t.Errorf("server saw %d calls; want 2", n)
		}
		a.ended(t, 2)
	})
	t.Run("AfterRecv", func(t *testing.T) {
		a := &attempts{}
		st, _ := watch(t, context.Background(), func(n int) step {
			if n == 1 {
				return step{code: codes.Unavailable}
			}
			return step{header: true, sends: 1}
		}, quick(nil), a)
		if n, err := recvAll(st); n != 1 || err != io.EOF {
			t.Errorf("Recv() gave %d messages, then %v; want 1, then io.EOF", n, err)
		}
		md, err := st.Header()
		if err != nil || !slices.Equal(md.Get("step"), []string{"header"}) {
			t.Errorf("Header() = %v, %v; want the second attempt's header", md, err)
		}
		a.ended(t, 2)
	})
}

func TestStreamPushback(t *testing.T) {
	t.Run("Delays", func(t *testing.T) {
		b, a := &recorder{}, &attempts{}
		st, srv := watch(t, context.Background(), fails(1, step{code: codes.ResourceExhausted, pushback: "30"}), &budget.Retrier{Budget: b, BaseDelay: time.Nanosecond}, a)
		if n, err := recvAll(st); n != 1 || err != io.EOF {
			t.Errorf("Recv() gave %d messages, then %v; want 1, then io.EOF", n, err)
		}
		calls := srv.Calls()
		if len(calls) != 2 {
			t.Fatalf("server saw %d calls; want 2", len(calls))
		}
		if gap := calls[1].Sub(calls[0]); gap < 30*time.Millisecond {
			t.Errorf("retry %v after the first attempt; want at least the pushback, 30ms", gap)
		}
		b.check(t, 1, []budget.Kind{budget.Throttled}, []budget.Kind{budget.Throttled})
		a.ended(t, 2)
	})
	t.Run("Stops", func(t *testing.T) {
		b, a := &recorder{}, &attempts{}
		st, srv := watch(t, context.Background(), fails(1, step{code: codes.Unavailable, pushback: "-1"}), quick(b), a)
		if n, err := recvAll(st); n != 0 || status.Code(err) != codes.Unavailable {
			t.Errorf("Recv() gave %d messages, then %v; want none, then UNAVAILABLE", n, err)
		}
		if n := len(srv.Calls()); n != 1 {
			t.Errorf("server saw %d calls; want 1", n)
		}
		b.check(t, 1, nil, nil)
		a.ended(t, 1)
	})
}

func TestStreamDenied(t *testing.T) {
	b, a := &recorder{deny: true}, &attempts{}
	st, srv := watch(t, context.Background(), always(step{code: codes.Unavailable}), quick(b), a)
	if _, err := st.Recv(); !errors.Is(err, budget.ErrDenied) || status.Code(err) != codes.Unavailable {
		t.Errorf("Recv() = %v; want UNAVAILABLE wrapped with budget.ErrDenied", err)
	}
	if n := len(srv.Calls()); n != 1 {
		t.Errorf("server saw %d calls; want 1", n)
	}
	b.check(t, 1, []budget.Kind{budget.Transient}, nil)
	a.ended(t, 1)
}

func TestStreamCancelDuringWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &attempts{}
	st, srv := watch(t, ctx, always(step{code: codes.Unavailable, pushback: "3600000"}), &budget.Retrier{MaxDelay: 2 * time.Hour}, a)
	done := make(chan error, 1)
	go func() {
		_, err := st.Recv()
		done <- err
	}()
	waitCalls(t, srv, 1)
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if status.Code(err) != codes.Canceled || !errors.Is(err, context.Canceled) {
			t.Errorf("Recv() = %v after a cancel; want CANCELLED, wrapping context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Recv() still running 10s after a cancel")
	}
	a.ended(t, 1)
}

// A stream that fails to open is retried if its status is, and otherwise
// fails at once.
func TestStreamOpenFails(t *testing.T) {
	t.Run("Retried", func(t *testing.T) {
		b := &recorder{}
		a := &attempts{fail: 2, failWith: status.Error(codes.Unavailable, "no connection")}
		st, srv := watch(t, context.Background(), always(step{sends: 1}), quick(b), a)
		if n, err := recvAll(st); n != 1 || err != io.EOF {
			t.Errorf("Recv() gave %d messages, then %v; want 1, then io.EOF", n, err)
		}
		if n := len(srv.Calls()); n != 1 {
			t.Errorf("server saw %d calls; want 1", n)
		}
		b.check(t, 1, []budget.Kind{budget.Transient, budget.Transient}, []budget.Kind{budget.Transient})
		a.ended(t, 3)
	})
	t.Run("NotRetried", func(t *testing.T) {
		b := &recorder{}
		a := &attempts{fail: 1, failWith: status.Error(codes.Internal, "bad options")}
		conn, _ := serve(t, always(step{}), grpc.WithChainStreamInterceptor(grpcbudget.StreamClientInterceptor(quick(b)), a.intercept))
		if _, err := healthpb.NewHealthClient(conn).Watch(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Internal {
			t.Errorf("Watch() = %v; want INTERNAL at once", err)
		}
		b.check(t, 0, nil, nil)
		a.ended(t, 1)
	})
	t.Run("DoneContext", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		a := &attempts{}
		conn, _ := serve(t, always(step{}), grpc.WithChainStreamInterceptor(grpcbudget.StreamClientInterceptor(nil), a.intercept))
		if _, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Canceled || !errors.Is(err, context.Canceled) {
			t.Errorf("Watch() = %v on a cancelled context; want CANCELLED, wrapping context.Canceled", err)
		}
		a.ended(t, 0)
	})
}

// Streams whose client sends more than one message pass through.
func TestClientStreamsNotRetried(t *testing.T) {
	for i, desc := range chatDesc.Streams {
		t.Run(desc.StreamName, func(t *testing.T) {
			b := &recorder{}
			conn, srv := serve(t, fails(1, step{code: codes.Unavailable}), grpc.WithStreamInterceptor(grpcbudget.StreamClientInterceptor(quick(b))))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st, err := conn.NewStream(ctx, &chatDesc.Streams[i], "/grpcbudget.test.Chat/"+desc.StreamName)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := st.SendMsg(&healthpb.HealthCheckRequest{}); err != nil && err != io.EOF {
					t.Fatalf("SendMsg() = %v", err)
				}
			}
			if err := st.CloseSend(); err != nil {
				t.Fatalf("CloseSend() = %v", err)
			}
			if err := st.RecvMsg(new(healthpb.HealthCheckResponse)); status.Code(err) != codes.Unavailable {
				t.Errorf("RecvMsg() = %v; want UNAVAILABLE, not retried", err)
			}
			if n := len(srv.Calls()); n != 1 {
				t.Errorf("server saw %d calls; want 1", n)
			}
			b.check(t, 0, nil, nil)
		})
	}
}

package grpcbudget_test

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/grpcbudget"
)

// A step is what the test server does in one call.
type step struct {
	code     codes.Code    // the status the call ends with; codes.OK for success
	pushback string        // the grpc-retry-pushback-ms trailer, unless ""
	sends    int           // Watch and Chat: messages sent before the status
	gap      time.Duration // Watch and Chat: the wait after the first message
	header   bool          // send a header ("step: header") first
	block    bool          // wait for the call's context to end, then fail
}

// fails returns a script that fails the first n calls as s says, and then
// succeeds, with one message for Watch.
func fails(n int, s step) func(int) step {
	return func(call int) step {
		if call <= n {
			return s
		}
		return step{sends: 1}
	}
}

// always returns a script that does s in every call.
func always(s step) func(int) step { return func(int) step { return s } }

// A server is the health service, scripted: its n-th call (of Check, Watch
// and the test Chat stream together) does what script(n) says.
type server struct {
	healthpb.UnimplementedHealthServer
	script func(n int) step

	mu       sync.Mutex
	calls    []time.Time // when each call started
	previous [][]string  // each call's grpc-previous-rpc-attempts values
	tags     [][]string  // each call's tag values
}

// next records a call that ctx is the context of, and returns its step.
func (s *server) next(ctx context.Context) step {
	previous := metadata.ValueFromIncomingContext(ctx, "grpc-previous-rpc-attempts")
	tag := metadata.ValueFromIncomingContext(ctx, "tag")
	s.mu.Lock()
	s.calls = append(s.calls, time.Now())
	s.previous = append(s.previous, previous)
	s.tags = append(s.tags, tag)
	n := len(s.calls)
	s.mu.Unlock()
	return s.script(n)
}

// Calls returns when each call started.
func (s *server) Calls() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Metadata returns each call's values of the request header
// grpc-previous-rpc-attempts, and of the metadata tag.
func (s *server) Metadata() (previous, tags [][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.previous), slices.Clone(s.tags)
}

// end ends a call as st says, once its messages are sent.
func end(ctx context.Context, st step, setTrailer func(metadata.MD)) error {
	if st.pushback != "" {
		setTrailer(metadata.Pairs(grpcbudget.PushbackKey, st.pushback))
	}
	if st.block {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	if st.code == codes.OK {
		return nil
	}
	return status.Errorf(st.code, "step %v", st.code)
}

func (s *server) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	st := s.next(ctx)
	if st.header {
		if err := grpc.SendHeader(ctx, metadata.Pairs("step", "header")); err != nil {
			return nil, err
		}
	}
	if err := end(ctx, st, func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) }); err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (s *server) Watch(_ *healthpb.HealthCheckRequest, ss grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	return s.stream(ss)
}

// stream serves a Watch or Chat call.
func (s *server) stream(ss grpc.ServerStream) error {
	st := s.next(ss.Context())
	if st.header {
		if err := ss.SendHeader(metadata.Pairs("step", "header")); err != nil {
			return err
		}
	}
	for i := range st.sends {
		if i == 1 {
			time.Sleep(st.gap)
		}
		if err := ss.SendMsg(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
			return err
		}
	}
	return end(ss.Context(), st, ss.SetTrailer)
}

// chatDesc describes a bidirectional stream and a client-streaming one,
// made of health messages, that the scripted server serves.
var chatDesc = grpc.ServiceDesc{
	ServiceName: "grpcbudget.test.Chat",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{
		{StreamName: "Bidi", ServerStreams: true, ClientStreams: true, Handler: chatHandler},
		{StreamName: "Upload", ClientStreams: true, Handler: chatHandler},
	},
}

func chatHandler(srv any, ss grpc.ServerStream) error { return srv.(*server).stream(ss) }

// serve starts the scripted server on a bufconn listener and returns a
// client connection to it, made with opts.
func serve(t testing.TB, script func(int) step, opts ...grpc.DialOption) (*grpc.ClientConn, *server) {
	t.Helper()
	srv := &server{script: script}
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, srv)
	gs.RegisterService(&chatDesc, srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	opts = append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, opts...)
	conn, err := grpc.NewClient("passthrough:///bufnet", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
		<-served
	})
	return conn, srv
}

// A recorder is a Budget that records what it is told, and grants every
// retry unless deny is set.
type recorder struct {
	deny bool

	mu        sync.Mutex
	requests  int
	retries   []budget.Kind // the kinds asked for, granted or not
	successes []budget.Kind
}

var _ budget.Budget = (*recorder)(nil)

func (r *recorder) Request() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
}

func (r *recorder) Retry(k budget.Kind) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retries = append(r.retries, k)
	return !r.deny
}

func (r *recorder) Success(k budget.Kind) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.successes = append(r.successes, k)
}

// told returns what r was told.
func (r *recorder) told() (requests int, retries, successes []budget.Kind) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, slices.Clone(r.retries), slices.Clone(r.successes)
}

// check fails t unless r was told of the given requests, retries and
// successes.
func (r *recorder) check(t *testing.T, requests int, retries, successes []budget.Kind) {
	t.Helper()
	n, re, su := r.told()
	if n != requests || !slices.Equal(re, retries) || !slices.Equal(su, successes) {
		t.Errorf("budget told %d requests, retries %v, successes %v; want %d, %v, %v", n, re, su, requests, retries, successes)
	}
}

// quick is a Retrier with short waits, over b.
func quick(b budget.Budget) *budget.Retrier {
	return &budget.Retrier{Budget: b, BaseDelay: time.Millisecond, MaxDelay: time.Minute}
}

// waitCalls waits until srv has seen n calls, for up to a minute.
func waitCalls(t *testing.T, srv *server, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); len(srv.Calls()) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("server saw %d calls in a minute; want %d", len(srv.Calls()), n)
		}
		time.Sleep(time.Millisecond)
	}
}

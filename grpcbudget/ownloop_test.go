package grpcbudget_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/grpcbudget"
	"github.com/retrybudget/retrybudget/internal/subjects/ownloop"
)

// hedge is a hedging loop of a team's own: it starts a first attempt and,
// at once, a second beside it; the first success wins, and when both have
// failed it returns the last failure. As it returns, it cancels the
// attempt still running, and waits for it; a patient hedge waits for it
// without cancelling it.
type hedge struct{ patient bool }

func (l hedge) Do(ctx context.Context, op func(context.Context, budget.Attempt) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	actx, cancel := context.WithCancel(ctx)
	outcomes := make(chan error)
	var wg sync.WaitGroup
	defer func() {
		if !l.patient {
			cancel()
		}
		go func() { wg.Wait(); close(outcomes); cancel() }()
		for range outcomes { // the loser
		}
	}()
	for n := 1; n <= 2; n++ {
		wg.Go(func() { outcomes <- op(actx, budget.Attempt{N: n}) })
	}
	var err error
	for range 2 {
		select {
		case err = <-outcomes:
			if err == nil {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("%w: %w", ownloop.ErrGaveUp, err)
}

// A counter is a unary interceptor, inside the one under test, that counts
// the attempts it sees, and the most it sees at once.
type counter struct {
	mu                     sync.Mutex
	calls, now, mostAtOnce int
}

func (c *counter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.calls++
	c.now++
	c.mostAtOnce = max(c.mostAtOnce, c.now)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.now--
		c.mu.Unlock()
	}()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// Through a loop of a team's own, the unary interceptor retries the codes
// it retries, and tells the loop what each failure came to through
// budget.DefaultClassifier and the RetryAfter method (the pushback's
// delay); each retry says how many attempts came before it, though the
// loop's Attempts say nothing.
func TestOwnLoopUnaryRetries(t *testing.T) {
	script := func(n int) step {
		switch n {
		case 1:
			return step{code: codes.Unavailable}
		case 2:
			return step{code: codes.ResourceExhausted, pushback: "30"}
		}
		return step{}
	}
	loop := &ownloop.Tries{Max: 3}
	srv, err := check(t, context.Background(), script, loop)
	if err != nil {
		t.Fatalf("Check() = %v; want success on the third attempt", err)
	}
	if n := len(srv.Calls()); n != 3 {
		t.Errorf("server saw %d calls; want 3", n)
	}
	want := []ownloop.Read{{Kind: budget.Transient, Retry: true}, {Kind: budget.Throttled, Retry: true, Delay: 30 * time.Millisecond, HasDelay: true}}
	if got := loop.Reads(); !slices.Equal(got, want) {
		t.Errorf("the loop read %v; want %v", got, want)
	}
	if previous, _ := srv.Metadata(); !slices.EqualFunc(previous, [][]string{nil, {"1"}, {"2"}}, slices.Equal) {
		t.Errorf("server saw grpc-previous-rpc-attempts %q; want none, then 1 and 2", previous)
	}
}

// When a loop of a team's own gives up, the call returns the loop's error,
// with the last attempt's code; a failure the interceptor does not retry
// reaches the loop as not retryable, and when the loop returns it as it is,
// the call returns the server's error itself.
func TestOwnLoopUnaryGivesUp(t *testing.T) {
	for _, tt := range []struct {
		name  string
		s     step
		calls int
		read  ownloop.Read
	}{
		{"OutOfAttempts", step{code: codes.Unavailable}, 2, ownloop.Read{Kind: budget.Transient, Retry: true}},
		{"NotRetried", step{code: codes.InvalidArgument}, 1, ownloop.Read{Kind: budget.FirstAttempt}},
		{"Committed", step{code: codes.Unavailable, header: true}, 1, ownloop.Read{Kind: budget.FirstAttempt}},
		{"PushbackStops", step{code: codes.Unavailable, pushback: "-1"}, 1, ownloop.Read{Kind: budget.FirstAttempt}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			loop := &ownloop.Tries{Max: 2}
			srv, err := check(t, context.Background(), always(tt.s), loop)
			if status.Code(err) != tt.s.code {
				t.Errorf("Check() = %v; want code %v", err, tt.s.code)
			}
			if tt.calls > 1 && !errors.Is(err, ownloop.ErrGaveUp) {
				t.Errorf("Check() = %v; want the loop's error", err)
			}
			if s, ok := err.(interface{ GRPCStatus() *status.Status }); tt.calls == 1 && (!ok || s.GRPCStatus().Message() != "step "+tt.s.code.String()) {
				t.Errorf("Check() = %#v; want the server's status error itself", err)
			}
			if n := len(srv.Calls()); n != tt.calls {
				t.Errorf("server saw %d calls; want %d", n, tt.calls)
			}
			if got := loop.Reads(); len(got) != tt.calls || got[len(got)-1] != tt.read {
				t.Errorf("the loop read %v; want %d reads, the last %v", got, tt.calls, tt.read)
			}
		})
	}
}

// A cancel under a loop of a team's own returns at once, with CANCELLED,
// during the loop's wait and during an attempt.
func TestOwnLoopUnaryCancel(t *testing.T) {
	for _, tt := range []struct {
		name string
		s    step
		wait time.Duration
	}{
		{"DuringWait", step{code: codes.Unavailable}, time.Hour},
		{"DuringAttempt", step{block: true}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			conn, srv := serve(t, always(tt.s), grpc.WithUnaryInterceptor(grpcbudget.UnaryClientInterceptor(&ownloop.Tries{Max: 3, Wait: tt.wait})))
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
}

// Under a loop that hedges, the unary interceptor runs one attempt at a
// time, since a call has one reply: the hedge waits for the first attempt,
// and sends nothing when it succeeded, whether the loop cancels it or not,
// or runs as the retry when it failed.
func TestOwnLoopUnaryHedge(t *testing.T) {
	for _, tt := range []struct {
		name   string
		loop   hedge
		script func(int) step
		calls  int
	}{
		{"FirstSucceeds", hedge{}, always(step{}), 1},
		{"FirstSucceedsPatient", hedge{patient: true}, always(step{}), 1},
		{"FirstFails", hedge{}, fails(1, step{code: codes.Unavailable}), 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &counter{}
			conn, _ := serve(t, tt.script, grpc.WithChainUnaryInterceptor(grpcbudget.UnaryClientInterceptor(tt.loop), c.intercept))
			resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("Check() = %v, %v; want SERVING", resp, err)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.calls != tt.calls || c.mostAtOnce != 1 {
				t.Errorf("%d attempts, at most %d at once; want %d, one at a time", c.calls, c.mostAtOnce, tt.calls)
			}
		})
	}
}

// Through a loop of a team's own, the stream interceptor retries a stream
// until its response begins, and the stream the caller reads outlives the
// attempt's context, which the loop ends as the attempt returns (the
// messages after the first come later); when the loop gives up, the stream
// returns its error.
func TestOwnLoopStream(t *testing.T) {
	for _, tt := range []struct {
		name    string
		script  func(int) step
		streams int
		msgs    int
		code    codes.Code // of the error after the messages; OK for io.EOF
	}{
		{"FirstAttempt", always(step{sends: 3, gap: 20 * time.Millisecond}), 1, 3, codes.OK},
		{"Retry", func(n int) step {
			if n == 1 {
				return step{code: codes.Unavailable}
			}
			return step{sends: 3, gap: 20 * time.Millisecond}
		}, 2, 3, codes.OK},
		{"GivesUp", always(step{code: codes.Unavailable}), 2, 0, codes.Unavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := &attempts{}
			st, srv := watch(t, context.Background(), tt.script, &ownloop.Tries{Max: 2}, a)
			n, err := recvAll(st)
			if tt.code == codes.OK && err != io.EOF || tt.code != codes.OK && (status.Code(err) != tt.code || !errors.Is(err, ownloop.ErrGaveUp)) || n != tt.msgs {
				t.Errorf("Recv() gave %d messages, then %v; want %d, then code %v (io.EOF for OK), the loop's error", n, err, tt.msgs, tt.code)
			}
			if n := len(srv.Calls()); n != tt.streams {
				t.Errorf("server saw %d calls; want %d", n, tt.streams)
			}
			a.ended(t, tt.streams)
		})
	}
}

// Under a loop that hedges, the stream interceptor runs one attempt at a
// time, and opens no stream once an attempt has had its response, whether
// the loop cancels the hedge or not.
func TestOwnLoopStreamHedge(t *testing.T) {
	for _, tt := range []struct {
		name    string
		loop    hedge
		script  func(int) step
		streams int
	}{
		{"FirstSucceeds", hedge{}, always(step{sends: 1}), 1},
		{"FirstSucceedsPatient", hedge{patient: true}, always(step{sends: 1}), 1},
		{"FirstFails", hedge{}, fails(1, step{code: codes.Unavailable}), 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := &attempts{}
			st, _ := watch(t, context.Background(), tt.script, tt.loop, a)
			if n, err := recvAll(st); n != 1 || err != io.EOF {
				t.Errorf("Recv() gave %d messages, then %v; want 1, then io.EOF", n, err)
			}
			a.ended(t, tt.streams)
		})
	}
}

// WithBudgetFor needs a *budget.Retrier: with a loop of a team's own,
// every call fails at once with INTERNAL, unsent. A loop that returns nil
// when no attempt succeeded is an error, INTERNAL too.
func TestOwnLoopMisuse(t *testing.T) {
	pick := grpcbudget.WithBudgetFor(func(context.Context, string, *grpc.ClientConn) (budget.Budget, error) { return &recorder{}, nil })
	nothing := ownloop.Func(func(context.Context, func(context.Context, budget.Attempt) error) error { return nil })
	for _, tt := range []struct {
		name string
		loop budget.Loop
		opts []grpcbudget.Option
		want string
	}{
		{"WithBudgetFor", &ownloop.Tries{Max: 2}, []grpcbudget.Option{pick}, "WithBudgetFor needs a *budget.Retrier"},
		{"NilWithoutSuccess", nothing, nil, "no attempt succeeded"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := &attempts{}
			conn, srv := serve(t, always(step{sends: 1}),
				grpc.WithUnaryInterceptor(grpcbudget.UnaryClientInterceptor(tt.loop, tt.opts...)),
				grpc.WithChainStreamInterceptor(grpcbudget.StreamClientInterceptor(tt.loop, tt.opts...), a.intercept))
			client := healthpb.NewHealthClient(conn)
			if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Internal || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check() = %v; want INTERNAL, saying %q", err, tt.want)
			}
			st, err := client.Watch(context.Background(), &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = st.Recv()
			}
			if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Watch() then Recv() = %v; want INTERNAL, saying %q", err, tt.want)
			}
			if tt.name == "WithBudgetFor" {
				if n := len(srv.Calls()); n != 0 {
					t.Errorf("server saw %d calls; want none", n)
				}
				a.ended(t, 0)
			} else {
				a.ended(t, 1) // the stream opens with the call, and ends with it
			}
		})
	}
}

// A stream attempt whose context ends while it waits for the response, by
// a loop's timeout per attempt, fails with that context's code.
func TestOwnLoopStreamAttemptDeadline(t *testing.T) {
	perAttempt := ownloop.Func(func(ctx context.Context, op func(context.Context, budget.Attempt) error) error {
		actx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		return op(actx, budget.Attempt{N: 1})
	})
	a := &attempts{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, _ := watch(t, ctx, always(step{block: true}), perAttempt, a)
	done := make(chan error, 1)
	go func() {
		_, err := st.Recv()
		done <- err
	}()
	select {
	case err := <-done:
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("Recv() = %v; want DEADLINE_EXCEEDED, the attempt's", err)
		}
	case <-time.After(10 * time.Second):
		cancel()
		<-done
		t.Fatal("Recv() still running 10s after the attempt's deadline")
	}
	a.ended(t, 1)
}

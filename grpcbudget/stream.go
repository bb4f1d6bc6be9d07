package grpcbudget

import (
	"context"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrybudget/retrybudget/budget"
)

// StreamClientInterceptor returns an interceptor that retries, under l,
// most often a *budget.Retrier, the streams it is safe to retry: those
// whose client sends at most one message (desc.ClientStreams is false:
// server-streaming calls), and only until the response begins.
//
// Such a stream opens as it would without the interceptor, and keeps the
// request the client sends. Its first RecvMsg or Header runs the call's
// retry loop ([budget.Loop.Do] with the call's context), in which an
// attempt waits for the first response: the first message for RecvMsg,
// the header for Header. An attempt succeeds, for the budget, when that
// arrives, or when the stream ends with OK and no message. When it fails
// first, the interceptor ends the failed stream, opens another with the
// call's options, resends the request and waits again, until one of these
// ends the call, as they end a unary call under [UnaryClientInterceptor]:
//
//   - the attempt's status is not retried (UNAVAILABLE and
//     RESOURCE_EXHAUSTED are, see [WithCodes]);
//   - the server's pushback, read from the stream's trailer (see
//     [PushbackKey]), forbids a retry;
//   - the attempt had received the response's header before it failed:
//     the server has committed the call (a trailers-only response has no
//     header, and is retried);
//   - the budget denies the retry (budget.ErrDenied);
//   - the Retrier runs out of attempts (budget.ErrAttempts), or of time
//     (budget.ErrNoTime);
//   - the call's context ends.
//
// Once the response has begun, what follows on that stream, its errors
// included, passes through, never retried: the client may have seen part
// of the response. Every retry of the call happens inside that first
// RecvMsg or Header, which returns the call's outcome as the unary
// interceptor does; later calls of RecvMsg return the same error.
//
// Each retry's stream carries the header grpc-previous-rpc-attempts, the
// number of attempts before it, in place of any value the caller's
// outgoing metadata had for that key, as the unary interceptor's retries
// do; the first attempt's stream has the caller's metadata, untouched.
//
// Each attempt's stream has a context of its own, derived from the call's,
// which the interceptor cancels when the attempt fails, when the call gives
// up, and when RecvMsg returns an error after the response has begun; the
// call's context ends it too. A caller that abandons a stream must still
// cancel the call's context, as grpc.ClientConn.NewStream asks. Context
// returns the current attempt's stream's context; Trailer the last
// attempt's trailer. Call options apply to every attempt's stream:
// grpc.OnFinish runs once per attempt.
//
// A stream that fails to open with a status that is retried reports its
// failure, or the retries' outcome, at its first RecvMsg; one that fails
// with any other error returns it at once, as without the interceptor, and
// the budget is not told of it.
//
// Client-streaming and bidirectional streams (desc.ClientStreams true)
// pass through untouched: the interceptor does not buffer what the client
// sends, and neither retries them nor tells the budget of them.
//
// The interceptor takes l as [UnaryClientInterceptor] does: it copies a
// *budget.Retrier when it is made (nil means the zero Retrier), and runs
// any other loop as it is, telling it what each attempt came to through
// the attempt's error, one attempt at a time. Under such a loop, the
// attempt's context ends the attempt's stream until the first response
// comes, and no longer: a loop may end its attempts' contexts as it
// returns, and the stream the caller reads must outlive that.
//
// The interceptor is safe for concurrent use by multiple goroutines. A
// stream it returns keeps grpc.ClientStream's rules: SendMsg and CloseSend
// from one goroutine, RecvMsg from one goroutine; and the client must not
// change the request after SendMsg, since a retry sends it again.
func StreamClientInterceptor(l budget.Loop, opts ...Option) grpc.StreamClientInterceptor {
	c := newConfig(l, opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		if desc.ClientStreams {
			return streamer(ctx, desc, cc, method, callOpts...)
		}
		if err := ctx.Err(); err != nil {
			return nil, result(ctx, err)
		}
		s := &stream{ctx: ctx, c: c, desc: desc, cc: cc, method: method, streamer: streamer, opts: callOpts}
		if c.loop != nil {
			if c.misuse != nil {
				return nil, c.misuse
			}
			s.turns = newTurns()
		} else {
			rt, err := c.retrier(ctx, method, cc)
			if err != nil {
				return nil, err
			}
			s.r = rt
		}
		if _, err := s.open(ctx); err != nil {
			if _, retry := classify(c.attemptError(err, nil)); !retry {
				return nil, err
			}
			s.openErr = err
		}
		return s, nil
	}
}

// A stream is a server-streaming call under the interceptor: the stream of
// its current attempt, and what it takes to open another.
type stream struct {
	ctx      context.Context // the call's
	r        *budget.Retrier // the call's loop; nil for c.loop
	turns    *turns          // has c.loop's attempts take turns; nil for r
	c        *config
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption

	mu      sync.Mutex
	cs      grpc.ClientStream  // the current attempt's stream; nil if it failed to open
	cancel  context.CancelFunc // ends cs's context; nil with cs
	openErr error              // why the first attempt's stream failed to open
	req     any                // the request, once sent
	sent    bool               // SendMsg has been called
	closed  bool               // CloseSend has been called

	// loop is held while the retry loop runs, at the first RecvMsg or
	// Header. Once settled, cs is the call's stream for good, and err is
	// what RecvMsg returns: nil to read cs, else the call's outcome.
	loop    sync.Mutex
	settled atomic.Bool
	err     error
	eof     bool // the current attempt's stream ended with no response message
}

var _ grpc.ClientStream = (*stream)(nil)

// open opens a stream for an attempt on ctx, makes it the current one, and
// replays on it what the client has sent.
func (s *stream) open(ctx context.Context) (grpc.ClientStream, error) {
	actx, cancel := context.WithCancel(ctx)
	return s.openOn(actx, cancel)
}

// openOn is open on actx, which cancel ends.
func (s *stream) openOn(actx context.Context, cancel context.CancelFunc) (grpc.ClientStream, error) {
	cs, err := s.streamer(actx, s.desc, s.cc, s.method, s.opts...)
	if err != nil {
		cancel()
		return nil, err
	}
	s.mu.Lock()
	s.cs, s.cancel = cs, cancel
	req, sent, closed := s.req, s.sent, s.closed
	s.mu.Unlock()
	if sent {
		if err := cs.SendMsg(req); err != nil && err != io.EOF {
			return nil, err // io.EOF: the stream failed, and RecvMsg will say why
		}
	}
	if closed {
		if err := cs.CloseSend(); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// release ends the current attempt's stream's context.
func (s *stream) release() {
	s.mu.Lock()
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// attempt is attempt n of the retry loop, on ctx: it opens a stream (the
// first attempt's is open already) and calls first on it, which waits for
// the first response.
func (s *stream) attempt(ctx context.Context, n int, first func(grpc.ClientStream) error) error {
	s.eof = false
	s.mu.Lock()
	cs, openErr := s.cs, s.openErr
	s.mu.Unlock()
	if n > 1 {
		// The failed attempt has released its stream already.
		s.mu.Lock()
		s.cs, s.cancel = nil, nil
		s.mu.Unlock()
		var err error
		if cs, err = s.reopen(withPreviousAttempts(ctx, n-1)); err != nil {
			s.release()
			return s.c.attemptError(err, nil)
		}
	} else if openErr != nil {
		return s.c.attemptError(openErr, nil)
	}
	var stop func() bool
	if s.turns != nil {
		// A loop of the caller's own ends an attempt by its context (a
		// hedge that lost), and may end it as it returns: the attempt's
		// stream ends with it until the first response comes, not after.
		s.mu.Lock()
		cancel := s.cancel
		s.mu.Unlock()
		stop = context.AfterFunc(ctx, cancel)
	}
	err := first(cs)
	if stop != nil && !stop() {
		// ctx ended during the attempt, and ended the stream: the code is
		// ctx's (DEADLINE_EXCEEDED for its deadline), not the stream's. A
		// response that came as it ended is cut off, and no longer the
		// loop's.
		if err == nil || err == io.EOF || status.Code(err) == codes.Canceled {
			s.release()
			return s.c.attemptError(status.FromContextError(ctx.Err()).Err(), nil)
		}
	}
	switch err {
	case nil:
		return nil
	case io.EOF:
		s.eof = true
		return nil
	}
	// The stream has ended: its header and trailer are final.
	header, _ := cs.Header()
	trailer := cs.Trailer()
	s.release()
	if header != nil {
		// A header came before the failure: the response had begun.
		return committed(err)
	}
	return s.c.attemptError(err, trailer)
}

// reopen opens the stream of a retry on ctx, the attempt's. Under a loop
// of the caller's own, the stream has ctx's values but not its end: the
// call's context, and the stream's release, end it.
func (s *stream) reopen(ctx context.Context) (grpc.ClientStream, error) {
	if s.turns == nil {
		return s.open(ctx) // the Retrier's attempts have the call's context
	}
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopCall := context.AfterFunc(s.ctx, cancel)
	return s.openOn(actx, func() {
		stopCall()
		cancel()
	})
}

// run runs the retry loop, with first as each attempt's wait for the first
// response, unless it has run already. It reports whether it ran, and the
// call's outcome if it did: nil for a response message or header, io.EOF
// for a stream that ended with neither, else why the call gave up.
func (s *stream) run(first func(grpc.ClientStream) error) (bool, error) {
	s.loop.Lock()
	defer s.loop.Unlock()
	if s.settled.Load() {
		return false, nil
	}
	var err error
	if s.turns == nil {
		err = s.r.Do(s.ctx, func(ctx context.Context, a budget.Attempt) error {
			return s.attempt(ctx, a.N, first)
		})
	} else {
		err = s.turns.close(s.ctx, s.c.loop, s.c.loop.Do(s.ctx, func(ctx context.Context, _ budget.Attempt) (err error) {
			n, err := s.turns.start(ctx)
			if err != nil {
				return err
			}
			defer func() { s.turns.end(err == nil) }()
			return s.attempt(ctx, n, first)
		}))
	}
	err = result(s.ctx, err)
	if err == nil && s.eof {
		err = io.EOF
	}
	if err != nil {
		s.release() // the call's stream has ended, or never ran (ctx ended first)
	}
	s.err = err
	s.settled.Store(true)
	return true, err
}

// current returns the current attempt's stream, or nil.
func (s *stream) current() grpc.ClientStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cs
}

// RecvMsg receives a message. The first call runs the retry loop.
func (s *stream) RecvMsg(m any) error {
	if !s.settled.Load() {
		if ran, err := s.run(func(cs grpc.ClientStream) error { return cs.RecvMsg(m) }); ran {
			return err
		}
	}
	if s.err != nil {
		return s.err
	}
	err := s.cs.RecvMsg(m)
	if err != nil {
		s.release()
	}
	return err
}

// Header returns the response's header, as grpc.ClientStream's Header
// does: nil with a nil error when the stream ended without one, whose
// status RecvMsg then returns. A first call before RecvMsg runs the retry
// loop, an attempt waiting for the header.
func (s *stream) Header() (metadata.MD, error) {
	if !s.settled.Load() {
		var md metadata.MD
		ran, _ := s.run(func(cs grpc.ClientStream) error {
			var err error
			md, err = cs.Header()
			if md != nil || err != nil {
				return err
			}
			// The stream ended without a header, so without a message:
			// RecvMsg returns its status and decodes nothing.
			return cs.RecvMsg(nil)
		})
		if ran {
			if s.err != nil {
				md = nil
			}
			return md, nil
		}
	}
	if s.err != nil || s.cs == nil {
		return nil, nil
	}
	return s.cs.Header()
}

// Trailer returns the trailer of the last attempt's stream.
func (s *stream) Trailer() metadata.MD {
	if cs := s.current(); cs != nil {
		return cs.Trailer()
	}
	return nil
}

// CloseSend closes the sending side; the interceptor closes the streams
// of later attempts too.
func (s *stream) CloseSend() error {
	s.mu.Lock()
	s.closed = true
	cs := s.cs
	s.mu.Unlock()
	if cs == nil {
		return nil
	}
	return cs.CloseSend()
}

// Context returns the current attempt's stream's context, or the call's
// when no stream is open.
func (s *stream) Context() context.Context {
	if cs := s.current(); cs != nil {
		return cs.Context()
	}
	return s.ctx
}

// SendMsg sends the request, and keeps it to send again on a retry. A
// second message goes to the current stream as it is, which refuses it as
// grpc does for any stream whose client sends one message.
func (s *stream) SendMsg(m any) error {
	s.mu.Lock()
	first := !s.sent
	if first {
		s.req, s.sent = m, true
	}
	cs := s.cs
	s.mu.Unlock()
	if cs == nil {
		return nil // the stream failed to open; the retry loop sends m
	}
	err := cs.SendMsg(m)
	if err != nil && err != io.EOF {
		if first {
			s.mu.Lock()
			s.req, s.sent = nil, false
			s.mu.Unlock()
		}
		s.release() // grpc has ended the stream
	}
	return err
}

package grpcbudget

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retrybudget/retrybudget/budget"
)

// Errors of the attempts the interceptors refuse to run for a loop of the
// caller's own; each is marked not to retry.
var (
	errSucceeded = errors.New("grpcbudget: an attempt of the call has succeeded already")
	errReturned  = errors.New("grpcbudget: the loop has returned")
)

// turns has the attempts of one call under a loop of the caller's own take
// turns, one at a time, as the interceptors need: a unary call has one
// reply to decode into, a stream one current attempt. It numbers the
// attempts it lets run, and lets none run once one has succeeded or the
// loop has returned.
type turns struct {
	turn chan struct{} // holds a token while an attempt runs

	mu   sync.Mutex
	n    int  // the attempts started
	won  bool // an attempt has succeeded
	done bool // the loop has returned
}

func newTurns() *turns { return &turns{turn: make(chan struct{}, 1)} }

// start waits for the turn of an attempt on ctx, and returns its number;
// or an error, for an attempt that may not run: ctx's, or, marked not to
// retry, one that says an attempt has succeeded or the loop has returned.
// An attempt that starts must end.
func (t *turns) start(ctx context.Context) (int, error) {
	select {
	case t.turn <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var err error
	switch {
	case t.done:
		err = budget.MarkPermanent(errReturned)
	case t.won:
		err = budget.MarkPermanent(errSucceeded)
	default:
		err = ctx.Err()
	}
	if err != nil {
		<-t.turn
		return 0, err
	}
	t.n++
	return t.n, nil
}

// end ends the turn of the attempt that started last; won says it
// succeeded.
func (t *turns) end(won bool) {
	t.mu.Lock()
	t.won = t.won || won
	t.mu.Unlock()
	<-t.turn
}

// close records that loop has returned err for a call on ctx, and returns
// the call's error: err, joined with ctx's error when ctx has ended, so
// that the call's code is the context's, as under a Retrier; or, when err
// is nil but no attempt succeeded, an error that says so.
func (t *turns) close(ctx context.Context, loop budget.Loop, err error) error {
	t.mu.Lock()
	t.done = true
	won := t.won
	t.mu.Unlock()
	if err == nil && !won {
		return status.Errorf(codes.Internal, "grpcbudget: the loop, a %T, returned nil, but no attempt succeeded", loop)
	}
	if cerr := ctx.Err(); err != nil && cerr != nil && !errors.Is(err, cerr) {
		return errors.Join(cerr, err)
	}
	return err
}

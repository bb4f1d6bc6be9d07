package httpbudget

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"

	"github.com/retrybudget/retrybudget/budget"
)

// Errors of the attempts the Transport refuses to send for a loop of the
// caller's own; each is marked not to retry.
var (
	errSentOnce  = errors.New("httpbudget: the request may be sent only once, and it has been")
	errSucceeded = errors.New("httpbudget: an attempt of the request has succeeded already")
	errReturned  = errors.New("httpbudget: the loop has returned")
)

// roundTripLoop is RoundTrip under a loop that is not a *budget.Retrier.
func (t *Transport) roundTripLoop(req *http.Request, loop budget.Loop) (*http.Response, error) {
	if t.BudgetFor != nil {
		closeBody(req)
		return nil, fmt.Errorf("httpbudget: BudgetFor needs a *budget.Retrier as the Transport's Retrier, which is a %T: "+
			"give the loop its budget yourself", loop)
	}
	c := &loopCall{req: req, base: t.Base, classify: t.ClassifyResponse}
	if c.base == nil {
		c.base = http.DefaultTransport
	}
	idempotent := isIdempotent(req)
	c.once = !replayable(req) || !idempotent && !t.RetryNonIdempotent
	c.setKey = !idempotent && !c.once
	if c.once {
		c.sentEnded = make(chan struct{})
	}

	err := loop.Do(req.Context(), c.attempt)
	c.mu.Lock()
	c.done = true
	resp, sent := c.resp, c.sent
	c.resp = nil
	c.mu.Unlock()
	if !sent {
		closeBody(req) // no attempt took the body
	}
	if resp != nil && !isContextError(err) {
		return resp, nil
	}
	if resp != nil {
		resp.Body.Close()
	}
	if err == nil {
		return nil, fmt.Errorf("httpbudget: the loop, a %T, returned nil, but no attempt of %s %s got a response",
			loop, req.Method, req.URL.Redacted())
	}
	return nil, err
}

// A loopCall is one RoundTrip's state under a loop of the caller's own,
// whose attempts may overlap, and may come when the Transport can no
// longer send: each attempt takes mu to read and change it.
type loopCall struct {
	req      *http.Request      // the caller's, never changed
	base     http.RoundTripper  // sends each attempt
	classify ResponseClassifier // says which responses to retry; nil for DefaultResponseClassifier
	once     bool               // the request may be sent once only
	setKey   bool               // every attempt carries the dedup key as an Idempotency-Key header

	sentEnded chan struct{} // for a request sent once, closed when its attempt has ended

	mu      sync.Mutex
	started int            // the attempts started
	key     budget.Key     // the call's dedup key, set by its first attempt
	sent    bool           // an attempt took req.Body
	resp    *http.Response // the call's response so far: the success, or the last attempt's failure
	won     bool           // resp is a success
	done    bool           // the loop has returned
}

// attempt sends one attempt on ctx, unless it must not, and returns its
// error as call.attempt does, each failure marked as budget marks them.
func (c *loopCall) attempt(ctx context.Context, a budget.Attempt) error {
	c.mu.Lock()
	switch {
	case c.done:
		c.mu.Unlock()
		return budget.MarkPermanent(errReturned)
	case c.won:
		c.mu.Unlock()
		return budget.MarkPermanent(errSucceeded)
	case c.once && c.started > 0:
		c.mu.Unlock()
		// Let the attempt sent end first, so that a loop that hedges does
		// not give up on it for this one.
		select {
		case <-c.sentEnded:
		case <-ctx.Done():
			return ctx.Err()
		}
		return budget.MarkPermanent(errSentOnce)
	}
	c.started++
	n := c.started
	if n == 1 {
		c.key = a.Key
		if c.key == (budget.Key{}) {
			c.key = randomKey()
		}
	}
	var stale *http.Response
	if c.resp != nil {
		// A retry of the last failure: what is left of it goes.
		stale, c.resp = c.resp, nil
	}
	first := !c.sent
	c.sent = true
	c.mu.Unlock()
	if stale != nil {
		stale.Body.Close()
	}
	if c.once {
		defer close(c.sentEnded)
	}

	sendCtx, stop, cancel := c.sendContext(ctx)
	req, err := attemptRequest(sendCtx, c.req, budget.Attempt{N: n, Key: c.key}, first, c.setKey)
	if err != nil {
		stop()
		cancel()
		c.ended(nil, false)
		return err
	}
	resp, err := c.base.RoundTrip(req)
	if !stop() {
		// ctx ended during the attempt, and ended the send: the error is
		// ctx's (its deadline's, say), not the send's. A response that
		// came as it ended is cut off, and no longer the loop's.
		if err == nil && resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		if err == nil || isContextError(err) {
			resp, err = nil, context.Cause(ctx)
		}
	}
	if err != nil {
		cancel()
		if resp != nil && resp.Body != nil {
			resp.Body.Close() // a Base that breaks the RoundTripper contract
		}
		c.ended(nil, false)
		if c.once {
			return budget.MarkPermanent(err)
		}
		return err
	}
	if resp == nil {
		cancel()
		c.ended(nil, false)
		return ownFailure(errNoResponse)
	}
	if resp.Body == nil {
		resp.Body = http.NoBody
	}
	resp.Body = cancelOnClose(resp.Body, cancel)
	settle(resp, req, c.req)
	classify := c.classify
	if classify == nil {
		classify = DefaultResponseClassifier
	}
	kind, retry := classify(resp)
	switch {
	case !retry || !kind.IsRetry():
		if resp.StatusCode < 400 {
			c.ended(resp, true)
			return nil
		}
		err = newFailure(resp, budget.FirstAttempt)
	case c.once:
		err = newFailure(resp, budget.FirstAttempt)
	default:
		if resp.StatusCode != http.StatusSwitchingProtocols {
			readAhead(resp) // the loop may retry: free the connection
		}
		err = newFailure(resp, kind)
	}
	c.ended(resp, false)
	return err
}

// ended records the end of an attempt, with resp, its response (nil for
// none), a success if won is set. The call keeps resp, in place of the
// failure it had, unless it has a success already or the loop has
// returned: resp is then closed.
func (c *loopCall) ended(resp *http.Response, won bool) {
	c.mu.Lock()
	drop := resp
	if !c.done && !c.won {
		drop, c.resp, c.won = c.resp, resp, won
	}
	c.mu.Unlock()
	if drop != nil {
		drop.Body.Close()
	}
}

// sendContext returns the context to send an attempt on, from ctx, the
// attempt's: it has ctx's values, and it ends when the call's context
// does, or when ctx does before stop is called, or when cancel is called.
// A loop may end its attempts' contexts as it returns, and the body of the
// response the caller gets, which reads on this context, must outlive
// that; closing the body calls cancel.
func (c *loopCall) sendContext(ctx context.Context) (send context.Context, stop func() bool, cancel func()) {
	send, cancelSend := context.WithCancel(context.WithoutCancel(ctx))
	stopCall := context.AfterFunc(c.req.Context(), cancelSend)
	stop = context.AfterFunc(ctx, cancelSend)
	return send, stop, func() {
		stopCall()
		cancelSend()
	}
}

// cancelOnClose returns body, which ends the context it was read on,
// cancel's, when it is closed. The body of a 101 Switching Protocols,
// the connection, still writes.
func cancelOnClose(body io.ReadCloser, cancel func()) io.ReadCloser {
	if rw, ok := body.(io.ReadWriteCloser); ok {
		return &cancelRWBody{rw, cancel}
	}
	return &cancelBody{body, cancel}
}

// A cancelBody is a response's body that ends its context when closed.
type cancelBody struct {
	io.ReadCloser
	cancel func()
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// A cancelRWBody is a cancelBody that writes too.
type cancelRWBody struct {
	io.ReadWriteCloser
	cancel func()
}

func (b *cancelRWBody) Close() error {
	err := b.ReadWriteCloser.Close()
	b.cancel()
	return err
}

// randomKey returns a dedup key of 128 random bits.
func randomKey() budget.Key {
	var k budget.Key
	a, b := rand.Uint64(), rand.Uint64()
	for i := range 8 {
		k[i], k[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
	}
	return k
}

package httpbudget

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	"github.com/retrybudget/retrybudget/budget"
)

// idempotencyKey is the header that carries the call's dedup key on every
// attempt of a non-idempotent request the Transport may retry, and that
// marks a request as idempotent when the caller sets it (as it does for
// net/http's own Transport), together with xIdempotencyKey.
const (
	idempotencyKey  = "Idempotency-Key"
	xIdempotencyKey = "X-Idempotency-Key"
)

// A Transport is an [http.RoundTripper] that retries requests under a retry
// loop, most often a [budget.Retrier] and its Budget: each RoundTrip is one
// [budget.Loop.Do] call with the request's context, and each attempt one
// RoundTrip of Base with the attempt's context.
//
// By default the Transport retries these, and nothing else:
//
//   - 502 Bad Gateway and 504 Gateway Timeout, as [budget.Transient];
//   - 429 Too Many Requests and 503 Service Unavailable, as
//     [budget.Throttled], after the delay their Retry-After header asks
//     for, as delay-seconds or an HTTP-date, capped at the Retrier's
//     MaxDelay (a Retry-After of 0, a date past or a value of neither form
//     asks for no more than the backoff);
//   - every error of Base, as Transient: a refused or reset connection, an
//     unexpected EOF, a failed DNS lookup, a failed TLS handshake, a
//     certificate the client does not trust included; never a context's
//     error.
//
// ClassifyResponse changes which responses are retried, and as which kind
// (see [ResponseClassifier]; [DefaultResponseClassifier] is the default
// above, for wrapping). Retrier.Classify changes which errors of Base are
// (nil means [budget.DefaultClassifier]); it sees errors only, never a
// response, and never a context's error. A response that is not retried is
// returned as it is, at once: one with a status below 400 counts as the
// call's success to the budget, a 4xx or 5xx one ends the call without a
// success. To stop retrying certificate errors, which no retry mends, set
// the Retrier's Classify to
//
//	func(err error) (budget.Kind, bool) {
//		var certErr *tls.CertificateVerificationError
//		if errors.As(err, &certErr) ||
//			errors.As(err, new(x509.UnknownAuthorityError)) ||
//			errors.As(err, new(x509.HostnameError)) ||
//			errors.As(err, new(x509.CertificateInvalidError)) {
//			return budget.FirstAttempt, false
//		}
//		return budget.DefaultClassifier(err)
//	}
//
// Only a request that can be replayed safely is retried: its method is
// idempotent (GET, HEAD, OPTIONS, TRACE, PUT and DELETE, RFC 9110 section
// 9.2.2), or it carries an Idempotency-Key or X-Idempotency-Key header
// entry (an entry with no values counts, as for [http.Transport]), or
// RetryNonIdempotent is set; and it has no body, or a GetBody to make the
// body again (which [http.NewRequest] sets for the readers of package bytes
// and strings). Any other request is sent once, still counted by the
// budget.
//
// When the Retrier gives up on a response (the budget denied the retry, the
// attempts or the time ran out), RoundTrip returns that last response with
// a nil error, its body readable, as a RoundTripper does for any status;
// the Retrier's hooks, if it has any, say why. When it gives up on an error, or when the
// request's context ends, RoundTrip returns the Retrier's error, which
// wraps [budget.ErrDenied] and its other reasons, the context's error and
// the last attempt's error, and closes any response it holds.
//
// The body of a response that may be retried is read as soon as it comes,
// up to 4 KiB (but for a 101 Switching Protocols, whose body is the
// connection): a body that fits is then closed, so that its connection
// serves other requests during the backoff wait, and a longer one is
// closed before the next attempt. The response keeps what was read, for
// the caller, should it be the last.
//
// RoundTrip never changes the caller's request: an attempt that needs
// another context, a new body or the Idempotency-Key header is sent as a
// clone. The first attempt of a request that needs none of these is the
// request itself, so that the success path costs little.
//
// # A loop of your own
//
// Retrier may be any [budget.Loop], a loop that hedges say, or one built on
// another retry library. The Transport cannot reach into such a loop as it
// does into a Retrier, so it tells the loop what each attempt came to
// through the attempt's error, in the terms a Retrier reads:
// [budget.DefaultClassifier] of the error of a response returns the
// Transport's verdict (Transient or Throttled and true for a response to
// retry; FirstAttempt and false for a 4xx or 5xx one not to retry), and the
// error of a Throttled response with a Retry-After has a RetryAfter()
// time.Duration method that returns its delay. An error of Base reaches the
// loop as it is, for the loop to classify. The rest holds as above, with
// these differences:
//
//   - A request that may be sent only once has its failure marked not to
//     retry (budget.MarkPermanent), whatever it is. Should the loop call
//     again all the same, the Transport sends nothing: the attempt waits
//     for the one sent to end, and then fails, marked not to retry.
//   - Attempts may overlap: each one after the first has its own body,
//     from GetBody. When the loop gives up (returns an error that is not
//     the context's), RoundTrip returns the response of the attempt that
//     ended last, if it got one, with a nil error, as it does with a
//     Retrier; when the loop returns nil, the response of the first
//     attempt that succeeded. It closes the body of every other response,
//     those of attempts that end after the loop has returned included. A
//     loop that returns nil when no attempt got a response is an error.
//   - Every retryable response's body is read ahead, the last attempt's
//     too, since the Transport cannot know which attempt is the last.
//   - The dedup key of a request retried under RetryNonIdempotent is the
//     [budget.Attempt.Key] of the loop's first attempt, or a random one
//     when that is zero, on every attempt; an Attempt's N and Kind are the
//     loop's business, never read.
//   - BudgetFor needs a *budget.Retrier, which it hands the budget: with
//     another loop, whose budget is its own, every RoundTrip fails at once
//     with an error that says so, rather than run without the budget
//     BudgetFor would have picked.
//
// The zero Transport retries idempotent requests through
// [http.DefaultTransport] with the zero Retrier: 3 attempts, the default
// backoff, no budget. Most callers set Retrier, with a Budget shared by
// every call to the dependency, and put the Transport in an [http.Client].
// A Transport's fields must not change once it is in use.
//
// A Transport is safe for concurrent use by multiple goroutines.
type Transport struct {
	// Base sends each attempt. Nil means http.DefaultTransport.
	Base http.RoundTripper

	// Retrier runs each request's attempts. Nil, a nil *budget.Retrier
	// included, means the zero Retrier. The Transport copies a
	// *budget.Retrier for each request, and replaces the copy's Classify
	// with its own (which hands Retrier.Classify the errors of Base). Any
	// other loop runs each request as it is: see "A loop of your own".
	Retrier budget.Loop

	// ClassifyResponse says which responses are failures to retry, and of
	// which kind, as [ResponseClassifier] describes. Nil means
	// DefaultResponseClassifier. It sees every response of Base, each
	// success's included, on the goroutine of the attempt (the calling
	// goroutine, under a Retrier), so it must be quick.
	ClassifyResponse ResponseClassifier

	// BudgetFor, if set, picks each request's budget, in place of
	// Retrier.Budget: for example one budget per destination, kept by
	// req.URL.Host (see budget.Keyed). A nil Budget and a nil error keep
	// Retrier.Budget. An error fails the request at once, before any
	// attempt, with an error that wraps it. BudgetFor runs on the calling
	// goroutine, must not change req, and must be safe for concurrent use.
	// It needs Retrier to be a *budget.Retrier (or nil): with another
	// loop, every request fails at once.
	BudgetFor func(req *http.Request) (budget.Budget, error)

	// RetryNonIdempotent has the Transport retry requests of every method,
	// POST and PATCH included, when their body can be replayed. Every
	// attempt of such a request then carries an Idempotency-Key header
	// whose value is the call's dedup key ([budget.Key.String]), the same
	// on every attempt, so that a server that keeps the keys can carry the
	// request out once. A key the caller set is kept; a request sent once
	// gets none.
	RetryNonIdempotent bool
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip sends req, and retries it under the Retrier as [Transport]
// describes. It returns the first response that is not a failure to
// retry, or the last response when the Retrier gives up on one, with a nil
// error; an error when the request's context ends, when Base fails and
// the Retrier gives up, or when BudgetFor fails or is set with a loop
// that is not a *budget.Retrier.
//
// RoundTrip closes req.Body, whether it succeeds or fails, as a
// RoundTripper must.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req == nil {
		return nil, errors.New("httpbudget: RoundTrip of a nil *http.Request")
	}
	if t == nil {
		closeBody(req)
		return nil, errors.New("httpbudget: RoundTrip on a nil *Transport")
	}
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("httpbudget: RoundTrip of a request with a nil URL")
	}
	var r budget.Retrier
	switch l := t.Retrier.(type) {
	case nil:
	case *budget.Retrier:
		if l != nil {
			r = *l
		}
	default:
		return t.roundTripLoop(req, l)
	}
	if t.BudgetFor != nil {
		b, err := t.BudgetFor(req)
		if err != nil {
			closeBody(req)
			return nil, fmt.Errorf("httpbudget: no budget for %s %s: %w", req.Method, req.URL.Redacted(), err)
		}
		if b != nil {
			r.Budget = b
		}
	}
	c := call{req: req, base: t.Base, classify: t.ClassifyResponse}
	if c.base == nil {
		c.base = http.DefaultTransport
	}
	c.maxAttempts = r.MaxAttempts
	if c.maxAttempts <= 0 {
		c.maxAttempts = budget.DefaultMaxAttempts
	}
	idempotent := isIdempotent(req)
	if !replayable(req) || !idempotent && !t.RetryNonIdempotent {
		c.maxAttempts = 1
	}
	r.MaxAttempts = c.maxAttempts
	c.setKey = !idempotent && c.maxAttempts > 1
	r.Classify = classifier(r.Classify)

	err := r.Do(req.Context(), c.attempt)
	if !c.sent {
		closeBody(req) // the context was done: no attempt took the body
	}
	if err == nil || c.last != nil && !isContextError(err) {
		return c.last, nil
	}
	if c.last != nil {
		c.last.Body.Close()
	}
	return nil, err
}

// CloseIdleConnections closes the idle connections of Base, if it has a
// CloseIdleConnections method, as [http.Transport] has.
// [http.Client.CloseIdleConnections] calls it.
func (t *Transport) CloseIdleConnections() {
	if t == nil {
		return
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if ci, ok := base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// A call is one RoundTrip's state across its attempts.
type call struct {
	req         *http.Request      // the caller's, never changed
	base        http.RoundTripper  // sends each attempt
	classify    ResponseClassifier // says which responses to retry; nil for DefaultResponseClassifier
	maxAttempts int                // the attempts the call may make
	setKey      bool               // every attempt carries the dedup key as an Idempotency-Key header

	sent bool           // an attempt took req.Body
	last *http.Response // the last attempt's response, if it got one
}

// attempt sends one attempt on ctx, and returns nil for a response not to
// retry with a status below 400 (a success to the budget), else the
// attempt's error: Base's own, or a *failure with the Transport's verdict
// on it, for a response to retry or a 4xx or 5xx one not to retry.
func (c *call) attempt(ctx context.Context, a budget.Attempt) error {
	if c.last != nil {
		// This is the retry of the last response, whose body was read
		// when it failed: close what is left.
		c.last.Body.Close()
		c.last = nil
	}
	first := !c.sent
	c.sent = true
	req, err := attemptRequest(ctx, c.req, a, first, c.setKey)
	if err != nil {
		return err
	}
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close() // a Base that breaks the RoundTripper contract
		}
		return err
	}
	if resp == nil {
		return ownFailure(errNoResponse)
	}
	settle(resp, req, c.req)
	c.last = resp
	var kind budget.Kind
	var retry bool
	if c.classify != nil {
		kind, retry = c.classify(resp)
	} else {
		kind, retry = DefaultResponseClassifier(resp) // a direct call, inlined: the default path costs what it did
	}
	if !retry || !kind.IsRetry() {
		if resp.StatusCode < 400 {
			return nil
		}
		return newFailure(resp, budget.FirstAttempt)
	}
	if a.N < c.maxAttempts && resp.StatusCode != http.StatusSwitchingProtocols {
		// The Retrier may retry: free the connection before the wait. The
		// body of a 101 is the connection itself, which may never end.
		readAhead(resp)
	}
	return newFailure(resp, kind)
}

// errNoResponse is the error of an attempt whose Base broke the
// RoundTripper contract.
var errNoResponse = errors.New("httpbudget: Base returned neither a response nor an error")

// settle gives resp, the response of Base to req, an attempt of the
// caller's orig, a body to close and orig as its Request, as http.Client
// and http.Transport do.
func settle(resp *http.Response, req, orig *http.Request) {
	if resp.Body == nil {
		resp.Body = http.NoBody // as http.Client does, so that every response here has a body to close
	}
	if resp.Request == nil || resp.Request == req && req != orig {
		resp.Request = orig // the caller's, as http.Transport sets it, not the attempt's clone
	}
}

// attemptRequest returns the request for attempt a of req on ctx: req
// itself when it will do, else a clone with ctx, a new body for any
// attempt but the first to be sent, and a's dedup key when setKey is set.
func attemptRequest(ctx context.Context, req *http.Request, a budget.Attempt, first, setKey bool) (*http.Request, error) {
	if first && !setKey {
		if sameContext(ctx, req.Context()) {
			return req, nil
		}
		return req.WithContext(ctx), nil
	}
	r := req.Clone(ctx)
	if !first && hasBody(req) {
		body, err := req.GetBody()
		if err != nil {
			return nil, ownFailure(fmt.Errorf("httpbudget: GetBody for attempt %d: %w", a.N, err))
		}
		r.Body = body
	}
	if setKey {
		if r.Header == nil {
			r.Header = make(http.Header, 1)
		}
		r.Header[idempotencyKey] = []string{a.Key.String()}
	}
	return r, nil
}

// classifier returns the Retrier's Classifier for a call: the verdict of
// a failure, no retry of a context's error, and own (nil means
// budget.DefaultClassifier) for the other errors of Base.
func classifier(own budget.Classifier) budget.Classifier {
	if own == nil {
		return classifyDefault // no closure: the success path allocates less
	}
	return func(err error) (budget.Kind, bool) {
		if kind, ok, decided := verdict(err); decided {
			return kind, ok
		}
		return own(err)
	}
}

// classifyDefault is classifier(nil).
func classifyDefault(err error) (budget.Kind, bool) {
	if kind, ok, decided := verdict(err); decided {
		return kind, ok
	}
	return budget.DefaultClassifier(err)
}

// verdict returns the Transport's verdict on an attempt's error, if it has
// one: a failure's kind, and no retry for a context's error.
func verdict(err error) (kind budget.Kind, retry, decided bool) {
	if f, ok := err.(*failure); ok {
		return f.kind, f.kind.IsRetry(), true
	}
	if isContextError(err) {
		return budget.FirstAttempt, false, true
	}
	return budget.FirstAttempt, false, false
}

// isIdempotent reports whether req may be sent more than once with the
// effect of sending it once: by its method (RFC 9110, section 9.2.2), or by
// an idempotency key the caller set.
func isIdempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return hasKey(req.Header)
}

// hasKey reports whether h has an idempotency key entry, even one with no
// values (which http.Transport reads as "idempotent, send no header").
func hasKey(h http.Header) bool {
	_, ok := h[idempotencyKey]
	if !ok {
		_, ok = h[xIdempotencyKey]
	}
	return ok
}

// hasBody reports whether req has a body to send.
func hasBody(req *http.Request) bool { return req.Body != nil && req.Body != http.NoBody }

// replayable reports whether req's body can be sent again.
func replayable(req *http.Request) bool { return !hasBody(req) || req.GetBody != nil }

// closeBody closes the body of a request that no attempt took.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// isContextError reports whether err is, or wraps, a context's error.
func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// sameContext reports whether a and b are the same context, without the
// panic of == on two values of one uncomparable type.
func sameContext(a, b context.Context) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

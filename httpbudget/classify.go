package httpbudget

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// readAheadLimit bounds how much of a retried response's body the
// Transport reads before the backoff wait: a body that fits is read to its
// end, which frees the connection.
const readAheadLimit = 4 << 10

// A ResponseClassifier says whether a response is a failure to retry and,
// if so, of which kind the retry is: [budget.Transient] or
// [budget.Throttled]. It is the [budget.Classifier] of responses, as
// Retrier.Classify is of errors.
//
// The response is the attempt's, its Request the caller's request (so
// that resp.Request.URL.Host names the destination), its Body not yet
// read. A ResponseClassifier may read the status and the headers; it must
// not read or close the body, nor change the response, and it must be safe
// for concurrent use.
//
// A response is retried only when retryable is true and kind is Transient
// or Throttled: any other kind with true, or any kind with false, returns
// the response as it is. A Throttled retry waits the delay the response's
// Retry-After header asks for, in place of the backoff, capped at the
// Retrier's MaxDelay; a Transient one waits the backoff, whatever the
// header says.
type ResponseClassifier func(resp *http.Response) (kind budget.Kind, retryable bool)

// DefaultResponseClassifier is the [ResponseClassifier] of a Transport
// whose ClassifyResponse is nil: it retries 502 Bad Gateway and 504
// Gateway Timeout as [budget.Transient], 429 Too Many Requests and 503
// Service Unavailable as [budget.Throttled], and no other response, nor a
// nil one. Wrap it to change a few statuses and keep the rest.
func DefaultResponseClassifier(resp *http.Response) (kind budget.Kind, retryable bool) {
	if resp == nil {
		return budget.FirstAttempt, false
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return budget.Transient, true
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return budget.Throttled, true
	}
	return budget.FirstAttempt, false
}

// A failure is an attempt's error with the Transport's verdict on it, which
// the call's Classifier hands a budget.Retrier: a response to retry, or one
// not to retry of a 4xx or 5xx status, or an error of the Transport's own.
// It wraps the verdict as budget marks it, so that a loop of another kind
// reads the verdict with budget.DefaultClassifier: the kind, and for a
// Throttled response with a Retry-After, the delay (the RetryAfter method
// of budget.MarkThrottled's error).
type failure struct {
	resp *http.Response // the response, for a status; else nil
	kind budget.Kind    // Transient or Throttled; anything else is not retried
	err  error          // the verdict: budget's mark of kind on a statusError of resp, or on the Transport's own error
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// ownFailure returns the failure of the Transport's own error err, which
// is not retried.
func ownFailure(err error) error {
	return &failure{kind: budget.FirstAttempt, err: budget.MarkPermanent(err)}
}

// A statusError is the error of a response's status.
type statusError struct{ resp *http.Response }

func (e statusError) Error() string {
	status := e.resp.Status
	if status == "" {
		status = strconv.Itoa(e.resp.StatusCode) + " " + http.StatusText(e.resp.StatusCode)
	}
	return "httpbudget: response " + status
}

// newFailure returns the failure of resp, of kind (any kind but Transient
// and Throttled is not retried): for a Throttled one, with the delay its
// Retry-After header asks for, if any.
func newFailure(resp *http.Response, kind budget.Kind) error {
	var err error
	switch kind {
	case budget.Transient:
		err = budget.MarkTransient(statusError{resp})
	case budget.Throttled:
		var after time.Duration
		if v := resp.Header.Get("Retry-After"); v != "" {
			after = retryAfter(v, time.Now())
		}
		err = budget.MarkThrottled(statusError{resp}, after)
	default:
		kind = budget.FirstAttempt
		err = budget.MarkPermanent(statusError{resp})
	}
	return &failure{resp: resp, kind: kind, err: err}
}

// maxSeconds is the most delay-seconds a time.Duration holds.
const maxSeconds = uint64(math.MaxInt64 / int64(time.Second))

// retryAfter returns the delay that v, a Retry-After header value, asks
// for at now (RFC 9110, section 10.2.3): delay-seconds, or the time until an
// HTTP-date, zero for a date in the past. A delay too long for a Duration
// is the longest Duration (the Retrier caps it at MaxDelay). A value of
// neither form asks for no delay: zero, and the retry waits the backoff.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if c := v[0]; '0' <= c && c <= '9' { // no HTTP-date starts with a digit
		s, err := strconv.ParseUint(v, 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange), err == nil && s > maxSeconds:
			return math.MaxInt64
		case err != nil:
			return 0
		}
		return time.Duration(s) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return max(t.Sub(now), 0)
}

// readAhead reads resp's body, up to readAheadLimit bytes, and puts back a
// body that reads the same bytes. A body that fits is closed now, which
// hands its connection back to Base; a longer one stays open, behind what
// was read, until it is closed. A read that fails closes the body, and the
// body put back ends with the read's error.
func readAhead(resp *http.Response) {
	body := resp.Body
	buf, err := io.ReadAll(io.LimitReader(body, readAheadLimit+1))
	switch {
	case err != nil:
		body.Close()
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(buf), errReader{err}))
	case len(buf) > readAheadLimit:
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(buf), body), body}
	case len(buf) == 0:
		body.Close()
		resp.Body = http.NoBody
	default:
		body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(buf))
	}
}

// A readCloser reads from Reader and closes Closer.
type readCloser struct {
	io.Reader
	io.Closer
}

// An errReader fails every Read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

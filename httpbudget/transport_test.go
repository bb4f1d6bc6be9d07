package httpbudget_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/httpbudget"
)

// Bad Gateway and Gateway Timeout are retried as Transient, until the
// server answers.
func TestGatewayErrorsRetried(t *testing.T) {
	s := serve(t, step{status: 502}, step{status: 504}, step{status: 200, body: "ok"})
	b := &recorder{}
	status, body, err := send(t, s.transport(quick(b)), s.get(t))
	if err != nil || status != 200 || body != "ok" {
		t.Fatalf("RoundTrip() = %d %q, %v; want 200 \"ok\"", status, body, err)
	}
	if n := len(s.received()); n != 3 {
		t.Errorf("server received %d requests; want 3", n)
	}
	b.check(t, 1, []budget.Kind{budget.Transient, budget.Transient}, []budget.Kind{budget.Transient})
}

// Each status is retried as its kind, or not at all: then the response
// is returned at once, a success to the budget only below 400.
func TestStatusKinds(t *testing.T) {
	for _, tt := range []struct {
		status  int
		kind    budget.Kind // FirstAttempt: not retried
		success bool        // the budget is told of the first attempt's success
	}{
		{429, budget.Throttled, false},
		{503, budget.Throttled, false},
		{502, budget.Transient, false},
		{504, budget.Transient, false},
		{200, budget.FirstAttempt, true},
		{204, budget.FirstAttempt, true},
		{304, budget.FirstAttempt, true},
		{308, budget.FirstAttempt, true},
		{400, budget.FirstAttempt, false},
		{404, budget.FirstAttempt, false},
		{408, budget.FirstAttempt, false},
		{409, budget.FirstAttempt, false},
		{500, budget.FirstAttempt, false},
		{501, budget.FirstAttempt, false},
		{505, budget.FirstAttempt, false},
	} {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			s := serve(t, step{status: tt.status, body: "first"}, step{status: 200, body: "second"})
			b := &recorder{}
			status, body, err := send(t, s.transport(quick(b)), s.get(t))
			if err != nil {
				t.Fatalf("RoundTrip() = %v; want a response", err)
			}
			if tt.kind.IsRetry() {
				if status != 200 || body != "second" {
					t.Errorf("RoundTrip() = %d %q; want the retry's 200 \"second\"", status, body)
				}
				b.check(t, 1, []budget.Kind{tt.kind}, []budget.Kind{tt.kind})
				return
			}
			if status != tt.status || body != "first" && tt.status != 204 && tt.status != 304 {
				t.Errorf("RoundTrip() = %d %q; want %d \"first\", not retried", status, body, tt.status)
			}
			if n := len(s.received()); n != 1 {
				t.Errorf("server received %d requests; want 1", n)
			}
			var successes []budget.Kind
			if tt.success {
				successes = []budget.Kind{budget.FirstAttempt}
			}
			b.check(t, 1, nil, successes)
		})
	}
}

// A POST is sent once by default, with no key added.
func TestPostNotRetriedByDefault(t *testing.T) {
	s := serve(t, step{status: 503, body: "busy"}, step{status: 200})
	b := &recorder{}
	req, err := http.NewRequest(http.MethodPost, s.URL, strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	status, body, err := send(t, s.transport(quick(b)), req)
	if err != nil || status != 503 || body != "busy" {
		t.Fatalf("RoundTrip() = %d %q, %v; want 503 \"busy\", not retried", status, body, err)
	}
	got := s.received()
	if len(got) != 1 {
		t.Fatalf("server received %d requests; want 1", len(got))
	}
	if k := got[0].header.Get("Idempotency-Key"); k != "" {
		t.Errorf("the POST carried Idempotency-Key %q; want none on a request sent once", k)
	}
	b.check(t, 1, nil, nil)
}

// With RetryNonIdempotent, a POST is retried, its body replayed, and every
// attempt carries the same Idempotency-Key: the call's dedup key.
func TestPostRetriedWithKey(t *testing.T) {
	s := serve(t, step{status: 503}, step{status: 502}, step{status: 201, body: "made"})
	tr := s.transport(quick(&recorder{}))
	tr.RetryNonIdempotent = true
	req, err := http.NewRequest(http.MethodPost, s.URL, strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	status, body, err := send(t, tr, req)
	if err != nil || status != 201 || body != "made" {
		t.Fatalf("RoundTrip() = %d %q, %v; want 201 \"made\"", status, body, err)
	}
	got := s.received()
	if len(got) != 3 {
		t.Fatalf("server received %d requests; want 3", len(got))
	}
	key := got[0].header.Get("Idempotency-Key")
	if len(key) != 32 || strings.Trim(key, "0123456789abcdef") != "" {
		t.Errorf("Idempotency-Key = %q; want the dedup key, 32 hexadecimal digits", key)
	}
	for i, r := range got {
		if k := r.header.Values("Idempotency-Key"); len(k) != 1 || k[0] != key {
			t.Errorf("attempt %d: Idempotency-Key %q; want [%q], as on the first", i+1, k, key)
		}
		if r.body != "payload" {
			t.Errorf("attempt %d: body %q; want \"payload\"", i+1, r.body)
		}
	}
	if _, ok := req.Header["Idempotency-Key"]; ok {
		t.Errorf("the caller's request gained Idempotency-Key %q", req.Header.Get("Idempotency-Key"))
	}

	// Each call has a key of its own.
	if _, _, err := send(t, tr, s.get(t)); err != nil {
		t.Fatal(err)
	}
	req2, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader("again"))
	if _, _, err := send(t, tr, req2); err != nil {
		t.Fatal(err)
	}
	got = s.received()
	if k := got[len(got)-1].header.Get("Idempotency-Key"); k == key || k == "" {
		t.Errorf("a second call's Idempotency-Key = %q; want a new key, not %q", k, key)
	}
	if k := got[3].header.Get("Idempotency-Key"); k != "" {
		t.Errorf("a GET carried Idempotency-Key %q; want none on an idempotent method", k)
	}
}

// An idempotency key the caller set makes the request idempotent, and is
// kept, with or without RetryNonIdempotent.
func TestCallerKeyKept(t *testing.T) {
	for _, tt := range []struct {
		name   string
		header string
		any    bool // RetryNonIdempotent
	}{
		{"IdempotencyKey", "Idempotency-Key", false},
		{"IdempotencyKeyWithRetryNonIdempotent", "Idempotency-Key", true},
		{"XIdempotencyKey", "X-Idempotency-Key", false},
		{"XIdempotencyKeyWithRetryNonIdempotent", "X-Idempotency-Key", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := serve(t, step{status: 503}, step{status: 200})
			tr := s.transport(quick(&recorder{}))
			tr.RetryNonIdempotent = tt.any
			req, err := http.NewRequest(http.MethodPatch, s.URL, strings.NewReader("patch"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(tt.header, "caller-key")
			if status, _, err := send(t, tr, req); err != nil || status != 200 {
				t.Fatalf("RoundTrip() = %d, %v; want 200 on the retry", status, err)
			}
			got := s.received()
			if len(got) != 2 {
				t.Fatalf("server received %d requests; want 2", len(got))
			}
			for i, r := range got {
				if k := r.header.Values(tt.header); len(k) != 1 || k[0] != "caller-key" {
					t.Errorf("attempt %d: %s %q; want [\"caller-key\"]", i+1, tt.header, k)
				}
				if tt.header != "Idempotency-Key" && r.header.Get("Idempotency-Key") != "" {
					t.Errorf("attempt %d: Idempotency-Key %q added beside the caller's %s", i+1, r.header.Get("Idempotency-Key"), tt.header)
				}
			}
		})
	}
}

// A 429's Retry-After of 1s replaces the backoff, capped at MaxDelay: the
// retry comes no sooner than the cap, though the backoff is zero.
func TestRetryAfterSecondsCapped(t *testing.T) {
	s := serve(t, step{status: 429, retryAfter: "1"}, step{status: 200})
	b := &recorder{}
	r := quick(b)
	r.Jitter = func(time.Duration) time.Duration { return 0 }
	if status, _, err := send(t, s.transport(r), s.get(t)); err != nil || status != 200 {
		t.Fatalf("RoundTrip() = %d, %v; want 200 on the retry", status, err)
	}
	got := s.received()
	if len(got) != 2 {
		t.Fatalf("server received %d requests; want 2", len(got))
	}
	if gap := got[1].at.Sub(got[0].at); gap < r.MaxDelay {
		t.Errorf("retried %v after a 429 with Retry-After: 1; want at least MaxDelay %v", gap, r.MaxDelay)
	}
	b.check(t, 1, []budget.Kind{budget.Throttled}, []budget.Kind{budget.Throttled})
}

// A 503's Retry-After as an HTTP-date is honoured too.
func TestRetryAfterDate(t *testing.T) {
	at := time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat) // at least 2s away
	s := serve(t, step{status: 503, retryAfter: at}, step{status: 200})
	b := &recorder{}
	r := quick(b)
	r.Jitter = func(time.Duration) time.Duration { return 0 }
	if status, _, err := send(t, s.transport(r), s.get(t)); err != nil || status != 200 {
		t.Fatalf("RoundTrip() = %d, %v; want 200 on the retry", status, err)
	}
	got := s.received()
	if len(got) != 2 {
		t.Fatalf("server received %d requests; want 2", len(got))
	}
	if gap := got[1].at.Sub(got[0].at); gap < r.MaxDelay {
		t.Errorf("retried %v after a 503 with Retry-After: %s; want at least MaxDelay %v", gap, at, r.MaxDelay)
	}
	b.check(t, 1, []budget.Kind{budget.Throttled}, []budget.Kind{budget.Throttled})
}

// When the budget denies the retry, the caller gets the last response, its
// body whole, and no error; the same when the attempts run out.
func TestGiveUpReturnsLastResponse(t *testing.T) {
	t.Run("Denied", func(t *testing.T) {
		s := serve(t, step{status: 503, body: "busy, try later"}, step{status: 200})
		b := &recorder{deny: true}
		status, body, err := send(t, s.transport(quick(b)), s.get(t))
		if err != nil || status != 503 || body != "busy, try later" {
			t.Fatalf("RoundTrip() = %d %q, %v; want 503 \"busy, try later\" and no error", status, body, err)
		}
		if n := len(s.received()); n != 1 {
			t.Errorf("server received %d requests; want 1", n)
		}
		b.check(t, 1, []budget.Kind{budget.Throttled}, nil)
	})
	t.Run("OutOfAttempts", func(t *testing.T) {
		big := strings.Repeat("x", 10<<10) // longer than the Transport reads ahead
		s := serve(t, step{status: 502, body: "one"}, step{status: 504, body: "two"}, step{status: 502, body: big})
		status, body, err := send(t, s.transport(quick(nil)), s.get(t))
		if err != nil || status != 502 || body != big {
			t.Fatalf("RoundTrip() = %d (%d bytes), %v; want the third answer: 502 and its %d bytes, no error", status, len(body), err, len(big))
		}
	})
	t.Run("LongBodyReadAhead", func(t *testing.T) {
		// The Retrier gives up after the Transport read ahead of a body
		// longer than it reads: the caller still gets all of it.
		big := strings.Repeat("y", 10<<10)
		s := serve(t, step{status: 503, body: big})
		b := &recorder{deny: true}
		status, body, err := send(t, s.transport(quick(b)), s.get(t))
		if err != nil || status != 503 || body != big {
			t.Fatalf("RoundTrip() = %d (%d bytes), %v; want 503 and its %d bytes, no error", status, len(body), err, len(big))
		}
	})
}

// A retry's body comes from GetBody: the server gets all of it on every
// attempt.
func TestBodyReplayed(t *testing.T) {
	payload := strings.Repeat("0123456789", 1000)
	s := serve(t, step{status: 502}, step{status: 503}, step{status: 200})
	req, err := http.NewRequest(http.MethodPut, s.URL, bytes.NewReader([]byte(payload)))
	if err != nil {
		t.Fatal(err)
	}
	if status, _, err := send(t, s.transport(quick(nil)), req); err != nil || status != 200 {
		t.Fatalf("RoundTrip() = %d, %v; want 200", status, err)
	}
	got := s.received()
	if len(got) != 3 {
		t.Fatalf("server received %d requests; want 3", len(got))
	}
	for i, r := range got {
		if r.body != payload {
			t.Errorf("attempt %d: server received %d bytes of the body; want all %d", i+1, len(r.body), len(payload))
		}
	}
}

// A request whose body cannot be made again is sent once.
func TestBodyWithoutGetBodyNotRetried(t *testing.T) {
	s := serve(t, step{status: 502, body: "bad gateway"}, step{status: 200})
	b := &recorder{}
	req, err := http.NewRequest(http.MethodPut, s.URL, io.MultiReader(strings.NewReader("once")))
	if err != nil {
		t.Fatal(err)
	}
	if req.GetBody != nil {
		t.Fatal("http.NewRequest set GetBody for an io.MultiReader")
	}
	status, body, err := send(t, s.transport(quick(b)), req)
	if err != nil || status != 502 || body != "bad gateway" {
		t.Fatalf("RoundTrip() = %d %q, %v; want 502 \"bad gateway\", not retried", status, body, err)
	}
	if got := s.received(); len(got) != 1 || got[0].body != "once" {
		t.Errorf("server received %v; want one request with body \"once\"", got)
	}
	b.check(t, 1, nil, nil)
}

// The body of a retried response is read and closed before the next
// attempt: over HTTP/1.1 every attempt reuses one connection.
func TestRetriedBodiesClosed(t *testing.T) {
	s := serve(t, step{status: 503, body: strings.Repeat("a", 1000)}, step{status: 502, body: "b"}, step{status: 200, body: "c"})
	base := s.Client().Transport
	var bodies []*trackedBody
	tr := &httpbudget.Transport{
		Retrier: quick(nil),
		Base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			for i, b := range bodies {
				if !b.drained() || !b.closed.Load() {
					t.Errorf("attempt %d started with the body of attempt %d read %d of %d bytes, closed %v; want read and closed", len(bodies)+1, i+1, b.read.Load(), b.size, b.closed.Load())
				}
			}
			resp, err := base.RoundTrip(req)
			if err != nil {
				return nil, err
			}
			all, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return nil, err
			}
			b := &trackedBody{r: bytes.NewReader(all), size: len(all)}
			bodies = append(bodies, b)
			resp.Body = b
			return resp, nil
		}),
	}
	status, body, err := send(t, tr, s.get(t))
	if err != nil || status != 200 || body != "c" {
		t.Fatalf("RoundTrip() = %d %q, %v; want 200 \"c\"", status, body, err)
	}
	if len(bodies) != 3 {
		t.Fatalf("%d attempts; want 3", len(bodies))
	}
	// Over the network: the server's connections.
	s2 := serve(t, step{status: 503, body: strings.Repeat("a", 1000)}, step{status: 502, body: "b"}, step{status: 200, body: "c"})
	if status, _, err := send(t, s2.transport(quick(nil)), s2.get(t)); err != nil || status != 200 {
		t.Fatalf("RoundTrip() = %d, %v; want 200", status, err)
	}
	if n := s2.connections(); n != 1 {
		t.Errorf("3 attempts opened %d connections; want 1, reused", n)
	}
}

// A retried response whose body is longer than the Transport reads ahead
// is closed, unread beyond that, before the next attempt.
func TestLongRetriedBodyClosed(t *testing.T) {
	var first *trackedBody
	n := 0
	tr := &httpbudget.Transport{
		Retrier: quick(nil),
		Base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			n++
			if n == 1 {
				resp := respond(req, 503, nil, "")
				first = &trackedBody{r: strings.NewReader(strings.Repeat("z", 1<<20)), size: 1 << 20}
				resp.Body = first
				return resp, nil
			}
			if !first.closed.Load() {
				t.Errorf("attempt %d started with the first response's body open", n)
			}
			return respond(req, 200, nil, "ok"), nil
		}),
	}
	req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	if status, _, err := send(t, tr, req); err != nil || status != 200 {
		t.Fatalf("RoundTrip() = %d, %v; want 200", status, err)
	}
	if got := first.read.Load(); got >= 1<<20 || got > 64<<10 {
		t.Errorf("the Transport read %d bytes of a 1 MiB body it retried; want a bounded read ahead", got)
	}
}

// A cancel during the backoff returns at once with context.Canceled, and
// closes the response it held.
func TestCancelDuringBackoff(t *testing.T) {
	s := serve(t, step{status: 503, retryAfter: "3600"})
	var held *trackedBody
	base := s.Client().Transport
	answered := make(chan struct{})
	tr := &httpbudget.Transport{
		Retrier: &budget.Retrier{MaxDelay: 2 * time.Hour},
		Base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := base.RoundTrip(req)
			if err == nil {
				all, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				held = &trackedBody{r: bytes.NewReader(all), size: len(all)}
				resp.Body = held
				close(answered)
			}
			return resp, err
		}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		done <- result{resp, err}
	}()
	select {
	case <-answered:
	case res := <-done:
		t.Fatalf("RoundTrip() = %v, %v before the server answered", res.resp, res.err)
	}
	time.Sleep(10 * time.Millisecond) // into the hour's wait
	cancel()
	select {
	case res := <-done:
		if res.resp != nil || !errors.Is(res.err, context.Canceled) {
			t.Errorf("RoundTrip() = %v, %v after a cancel during the wait; want an error wrapping context.Canceled", res.resp, res.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("RoundTrip() still waiting a minute after the cancel")
	}
	if !held.closed.Load() {
		t.Error("the 503's body is open after RoundTrip returned its error; want it closed")
	}
	if n := len(s.received()); n != 1 {
		t.Errorf("server received %d requests; want 1", n)
	}
}

// A request whose context is done is not sent, and its body is closed.
func TestDoneContextNotSent(t *testing.T) {
	s := serve(t, step{status: 200})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	body := &trackedBody{r: strings.NewReader("x"), size: 1}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := send(t, s.transport(nil), req); !errors.Is(err, context.Canceled) {
		t.Errorf("RoundTrip() = %v on a cancelled context; want context.Canceled", err)
	}
	if n := len(s.received()); n != 0 {
		t.Errorf("server received %d requests; want 0", n)
	}
	if !body.closed.Load() {
		t.Error("the request body is open; want it closed, as a RoundTripper must")
	}
}

// RoundTrip changes nothing of the caller's request, through retries,
// a replayed body and an added key.
func TestRequestNotChanged(t *testing.T) {
	s := serve(t, step{status: 503}, step{status: 502}, step{status: 200})
	tr := s.transport(quick(nil))
	tr.RetryNonIdempotent = true
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/path?q=1", strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Caller", "a")
	before := *req
	header := req.Header.Clone()
	url := *req.URL
	if status, _, err := send(t, tr, req); err != nil || status != 200 {
		t.Fatalf("RoundTrip() = %d, %v; want 200", status, err)
	}
	if !reflect.DeepEqual(req.Header, header) {
		t.Errorf("the request's header is %v after RoundTrip; want %v, unchanged", req.Header, header)
	}
	if *req.URL != url || req.Method != before.Method || req.Body != before.Body || req.Context() != ctx ||
		req.ContentLength != before.ContentLength || req.Host != before.Host {
		t.Errorf("the request changed in RoundTrip: %+v; want %+v", *req, before)
	}
}

// A nil Transport, a nil request and a request without a URL are errors,
// not panics.
func TestMisuse(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
	var nilTransport *httpbudget.Transport
	if resp, err := nilTransport.RoundTrip(req); resp != nil || err == nil {
		t.Errorf("(*Transport)(nil).RoundTrip() = %v, %v; want an error", resp, err)
	}
	nilTransport.CloseIdleConnections() // no panic
	if resp, err := (&httpbudget.Transport{}).RoundTrip(nil); resp != nil || err == nil {
		t.Errorf("RoundTrip(nil) = %v, %v; want an error", resp, err)
	}
	body := &trackedBody{r: strings.NewReader(""), size: 0}
	if resp, err := (&httpbudget.Transport{}).RoundTrip(&http.Request{Method: "PUT", Body: body}); resp != nil || err == nil {
		t.Errorf("RoundTrip(a request with no URL) = %v, %v; want an error", resp, err)
	}
	if !body.closed.Load() {
		t.Error("the request body is open; want it closed")
	}
}

// BudgetFor picks the budget per request; a nil budget keeps the
// Retrier's, and an error fails the request before it is sent.
func TestBudgetFor(t *testing.T) {
	s := serve(t, step{status: 502}, step{status: 200})
	shared, own := &recorder{}, &recorder{}
	tr := s.transport(quick(shared))
	tr.BudgetFor = func(req *http.Request) (budget.Budget, error) {
		switch req.URL.Path {
		case "/own":
			return own, nil
		case "/fail":
			return nil, errors.New("no budget here")
		}
		return nil, nil
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/own", nil)
	if status, _, err := send(t, tr, req); err != nil || status != 200 {
		t.Fatalf("RoundTrip(/own) = %d, %v; want 200", status, err)
	}
	own.check(t, 1, []budget.Kind{budget.Transient}, []budget.Kind{budget.Transient})
	shared.check(t, 0, nil, nil)

	req, _ = http.NewRequest(http.MethodGet, s.URL+"/shared", nil)
	if status, _, err := send(t, tr, req); err != nil || status != 200 {
		t.Fatalf("RoundTrip(/shared) = %d, %v; want 200", status, err)
	}
	shared.check(t, 1, nil, []budget.Kind{budget.FirstAttempt})

	body := &trackedBody{r: strings.NewReader("x"), size: 1}
	req, _ = http.NewRequest(http.MethodPut, s.URL+"/fail", body)
	_, _, err := send(t, tr, req)
	if err == nil || !strings.Contains(err.Error(), "no budget here") {
		t.Errorf("RoundTrip(/fail) = %v; want an error wrapping BudgetFor's", err)
	}
	if n := len(s.received()); n != 3 {
		t.Errorf("server received %d requests; want 3, none for /fail", n)
	}
	if !body.closed.Load() {
		t.Error("the request body is open; want it closed")
	}
}

// An error of Base, such as a connection closed without an answer, is
// retried as Transient; a refused connection too, until the attempts run
// out, and then RoundTrip returns the Retrier's error.
func TestTransportErrorsRetried(t *testing.T) {
	t.Run("HangUp", func(t *testing.T) {
		s := serve(t, step{hangUp: true}, step{status: 200, body: "ok"})
		b := &recorder{}
		status, body, err := send(t, s.transport(quick(b)), s.get(t))
		if err != nil || status != 200 || body != "ok" {
			t.Fatalf("RoundTrip() = %d %q, %v; want 200 \"ok\" on the retry", status, body, err)
		}
		b.check(t, 1, []budget.Kind{budget.Transient}, []budget.Kind{budget.Transient})
	})
	t.Run("Refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		b := &recorder{}
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		tr := &httpbudget.Transport{Base: base, Retrier: quick(b)}
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		_, _, err = send(t, tr, req)
		var op *net.OpError
		if !errors.Is(err, budget.ErrAttempts) || !errors.As(err, &op) {
			t.Errorf("RoundTrip() = %v; want an error wrapping budget.ErrAttempts and the dial's *net.OpError", err)
		}
		b.check(t, 1, []budget.Kind{budget.Transient, budget.Transient}, nil)
	})
}

// Retrier.Classify decides for the errors of Base only: a classifier that
// retries nothing stops the retry of a broken connection, not of a 503.
func TestClassifyForBaseErrorsOnly(t *testing.T) {
	s := serve(t, step{status: 503}, step{hangUp: true}, step{status: 200})
	r := quick(nil)
	r.Classify = func(error) (budget.Kind, bool) { return budget.FirstAttempt, false }
	// A new connection for each attempt: http.Transport resends by itself
	// a request that a reused connection drops.
	base := &http.Transport{DisableKeepAlives: true}
	defer base.CloseIdleConnections()
	_, _, err := send(t, &httpbudget.Transport{Base: base, Retrier: r}, s.get(t))
	if err == nil || errors.Is(err, budget.ErrAttempts) {
		t.Errorf("RoundTrip() = %v; want the broken connection's error itself, not retried", err)
	}
	if n := len(s.received()); n != 2 {
		t.Errorf("server received %d requests; want 2: the 503 retried, the hang-up not", n)
	}
}

// A HEAD request's retried response has no body to read.
func TestHeadRetried(t *testing.T) {
	s := serve(t, step{status: 503}, step{status: 200})
	req, _ := http.NewRequest(http.MethodHead, s.URL, nil)
	if status, _, err := send(t, s.transport(quick(nil)), req); err != nil || status != 200 {
		t.Fatalf("RoundTrip() = %d, %v; want 200", status, err)
	}
	if n := s.connections(); n != 1 {
		t.Errorf("2 attempts opened %d connections; want 1", n)
	}
}

// The Transport works inside an http.Client, whose CloseIdleConnections
// reaches Base.
func TestClient(t *testing.T) {
	s := serve(t, step{status: 502}, step{status: 200, body: "ok"})
	base := &http.Transport{}
	client := &http.Client{Transport: &httpbudget.Transport{Base: base, Retrier: quick(nil)}}
	resp, err := client.Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Errorf("Get() = %d %q; want 200 \"ok\"", resp.StatusCode, body)
	}
	client.CloseIdleConnections() // else the idle connection's goroutines outlive the test: goleak
}

// A GetBody that fails ends the call with its error, and the response it
// would have retried is closed.
func TestGetBodyFails(t *testing.T) {
	s := serve(t, step{status: 502}, step{status: 200})
	req, _ := http.NewRequest(http.MethodPut, s.URL, strings.NewReader("x"))
	broken := errors.New("body gone")
	req.GetBody = func() (io.ReadCloser, error) { return nil, broken }
	_, _, err := send(t, s.transport(quick(nil)), req)
	if !errors.Is(err, broken) {
		t.Errorf("RoundTrip() = %v; want an error wrapping GetBody's", err)
	}
	if n := len(s.received()); n != 1 {
		t.Errorf("server received %d requests; want 1", n)
	}
}

// The response's Request is the caller's, as http.Transport sets it, even
// when the attempt sent a clone.
func TestResponseRequestIsCallers(t *testing.T) {
	s := serve(t, step{status: 503}, step{status: 200})
	tr := s.transport(quick(nil))
	tr.RetryNonIdempotent = true
	req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader("x"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request != req {
		t.Errorf("resp.Request = %p; want the caller's request %p", resp.Request, req)
	}
}

package httpbudget_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/httpbudget"
)

// retry500 retries 500 Internal Server Error as Transient, and keeps the
// default for every other status.
func retry500(resp *http.Response) (budget.Kind, bool) {
	if resp.StatusCode == http.StatusInternalServerError {
		return budget.Transient, true
	}
	return httpbudget.DefaultResponseClassifier(resp)
}

// A 500 is not retried by default, and is with a ClassifyResponse that
// says so, as the kind it says.
func TestClassifyResponseRetries500(t *testing.T) {
	for _, tt := range []struct {
		name      string
		classify  httpbudget.ResponseClassifier
		status    int
		requests  int
		retries   []budget.Kind
		successes []budget.Kind
	}{
		{"Default", nil, 500, 1, nil, nil},
		{"DefaultResponseClassifier", httpbudget.DefaultResponseClassifier, 500, 1, nil, nil},
		{"Retry500", retry500, 200, 2, []budget.Kind{budget.Transient}, []budget.Kind{budget.Transient}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := serve(t, step{status: 500, body: "first"}, step{status: 200, body: "second"})
			b := &recorder{}
			tr := s.transport(quick(b))
			tr.ClassifyResponse = tt.classify
			status, _, err := send(t, tr, s.get(t))
			if err != nil || status != tt.status {
				t.Fatalf("RoundTrip() = %d, %v; want %d", status, err, tt.status)
			}
			if n := len(s.received()); n != tt.requests {
				t.Errorf("server received %d requests; want %d", n, tt.requests)
			}
			b.check(t, 1, tt.retries, tt.successes)
		})
	}
}

// A rule for one host: its 503 is returned at once, while another host's
// 503 is still retried.
func TestClassifyResponsePerHost(t *testing.T) {
	down := serve(t, step{status: 503, body: "down"}, step{status: 200})
	other := serve(t, step{status: 503, body: "busy"}, step{status: 200, body: "ok"})
	downHost := down.Listener.Addr().String()
	var hosts []string
	tr := &httpbudget.Transport{
		Retrier: quick(nil),
		ClassifyResponse: func(resp *http.Response) (budget.Kind, bool) {
			hosts = append(hosts, resp.Request.URL.Host) // RoundTrip calls it on the calling goroutine
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Request.URL.Host == downHost {
				return budget.FirstAttempt, false
			}
			return httpbudget.DefaultResponseClassifier(resp)
		},
	}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr.Base = base

	if status, body, err := send(t, tr, down.get(t)); err != nil || status != 503 || body != "down" {
		t.Errorf("RoundTrip(down) = %d %q, %v; want 503 \"down\", not retried", status, body, err)
	}
	if status, body, err := send(t, tr, other.get(t)); err != nil || status != 200 || body != "ok" {
		t.Errorf("RoundTrip(other) = %d %q, %v; want 200 \"ok\" on the retry", status, body, err)
	}
	if n, m := len(down.received()), len(other.received()); n != 1 || m != 2 {
		t.Errorf("servers received %d and %d requests; want 1 and 2", n, m)
	}
	otherHost := other.Listener.Addr().String()
	if want := []string{downHost, otherHost, otherHost}; strings.Join(hosts, " ") != strings.Join(want, " ") {
		t.Errorf("ClassifyResponse saw hosts %v; want %v", hosts, want)
	}
}

// A response classified Throttled waits what its Retry-After asks for,
// capped at MaxDelay, whatever its status; one classified Transient waits
// the backoff, here zero, whatever its Retry-After. The waits are the
// Retrier's own word (OnRetry's Delay), not a clock's reading, but for
// a lower bound no machine can break.
func TestClassifyResponseRetryAfter(t *testing.T) {
	const maxDelay = 20 * time.Millisecond
	for _, tt := range []struct {
		name   string
		status int
		kind   budget.Kind
		want   time.Duration
	}{
		{"500Throttled", 500, budget.Throttled, maxDelay},
		{"500Transient", 500, budget.Transient, 0},
		{"503Transient", 503, budget.Transient, 0},
		{"502Throttled", 502, budget.Throttled, maxDelay},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := serve(t, step{status: tt.status, retryAfter: "1"}, step{status: 200})
			b := &recorder{}
			var delays []time.Duration
			r := &budget.Retrier{
				Budget:   b,
				MaxDelay: maxDelay,
				Jitter:   func(time.Duration) time.Duration { return 0 },
				Hooks: budget.Hooks{OnRetry: func(_ context.Context, e budget.RetryEvent) {
					delays = append(delays, e.Delay)
				}},
			}
			tr := s.transport(r)
			tr.ClassifyResponse = func(resp *http.Response) (budget.Kind, bool) {
				if resp.StatusCode == tt.status {
					return tt.kind, true
				}
				return budget.FirstAttempt, false
			}
			if status, _, err := send(t, tr, s.get(t)); err != nil || status != 200 {
				t.Fatalf("RoundTrip() = %d, %v; want 200 on the retry", status, err)
			}
			if len(delays) != 1 || delays[0] != tt.want {
				t.Errorf("retry delays %v; want [%v]", delays, tt.want)
			}
			got := s.received()
			if len(got) != 2 {
				t.Fatalf("server received %d requests; want 2", len(got))
			}
			if gap := got[1].at.Sub(got[0].at); gap < tt.want {
				t.Errorf("retried %v after the %d; want at least %v", gap, tt.status, tt.want)
			}
			b.check(t, 1, []budget.Kind{tt.kind}, []budget.Kind{tt.kind})
		})
	}
}

// Only a verdict of Transient or Throttled with true retries. Any other
// kind with true, or any kind with false, returns the response at once: a
// success to the budget below 400, not one from 400 up. A 2xx may be
// retried (here one that carries Retry-After: 0). A classifier that
// retries everything gets the last response once the attempts run out.
func TestClassifyResponseVerdicts(t *testing.T) {
	for _, tt := range []struct {
		name      string
		first     step
		kind      budget.Kind
		retry     bool
		requests  int
		retries   []budget.Kind
		successes []budget.Kind
	}{
		{"FirstAttemptTrue", step{status: 500}, budget.FirstAttempt, true, 1, nil, nil},
		{"UnknownKindTrue", step{status: 500}, budget.Kind(9), true, 1, nil, nil},
		{"UnknownKindFalse", step{status: 500}, budget.Kind(200), false, 1, nil, nil},
		{"TransientFalse", step{status: 502}, budget.Transient, false, 1, nil, nil},
		{"ThrottledFalse", step{status: 503, retryAfter: "1"}, budget.Throttled, false, 1, nil, nil},
		{"SuccessNotRetried", step{status: 200, retryAfter: "0"}, budget.FirstAttempt, false, 1, nil, []budget.Kind{budget.FirstAttempt}},
		{"SuccessUnknownKindTrue", step{status: 200, retryAfter: "0"}, budget.Kind(9), true, 1, nil, []budget.Kind{budget.FirstAttempt}},
		{"SuccessRetried", step{status: 200, retryAfter: "0"}, budget.Transient, true, 2, []budget.Kind{budget.Transient}, []budget.Kind{budget.Transient}},
		{"RedirectRetried", step{status: 307, retryAfter: "0"}, budget.Throttled, true, 2, []budget.Kind{budget.Throttled}, []budget.Kind{budget.Throttled}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.first.body = "first"
			s := serve(t, tt.first, step{status: 200, body: "second"})
			b := &recorder{}
			tr := s.transport(quick(b))
			// The verdict for the first answer, which alone has Retry-After
			// or a status other than 200; no retry of the second.
			tr.ClassifyResponse = func(resp *http.Response) (budget.Kind, bool) {
				if resp.StatusCode != 200 || resp.Header.Get("Retry-After") != "" {
					return tt.kind, tt.retry
				}
				return budget.FirstAttempt, false
			}
			status, body, err := send(t, tr, s.get(t))
			if err != nil {
				t.Fatalf("RoundTrip() = %v; want a response", err)
			}
			want := "first"
			if tt.requests > 1 {
				want = "second"
			}
			if body != want {
				t.Errorf("RoundTrip() = %d %q; want the body %q", status, body, want)
			}
			if n := len(s.received()); n != tt.requests {
				t.Errorf("server received %d requests; want %d", n, tt.requests)
			}
			b.check(t, 1, tt.retries, tt.successes)
		})
	}
	t.Run("RetryEverything", func(t *testing.T) {
		s := serve(t, step{status: 200, body: "one"}, step{status: 201, body: "two"}, step{status: 500, body: "three"})
		b := &recorder{}
		tr := s.transport(quick(b))
		tr.ClassifyResponse = func(*http.Response) (budget.Kind, bool) { return budget.Transient, true }
		status, body, err := send(t, tr, s.get(t))
		if err != nil || status != 500 || body != "three" {
			t.Errorf("RoundTrip() = %d %q, %v; want the last answer, 500 \"three\", and no error", status, body, err)
		}
		b.check(t, 1, []budget.Kind{budget.Transient, budget.Transient}, nil)
	})
}

// ClassifyResponse sees the caller's request on every response: when the
// attempt was a clone, and when Base left resp.Request nil.
func TestClassifyResponseSeesCallersRequest(t *testing.T) {
	t.Run("Clone", func(t *testing.T) {
		s := serve(t, step{status: 503}, step{status: 200})
		req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader("x"))
		var seen []*http.Request
		tr := s.transport(quick(nil))
		tr.RetryNonIdempotent = true // every attempt a clone, with an Idempotency-Key
		tr.ClassifyResponse = func(resp *http.Response) (budget.Kind, bool) {
			seen = append(seen, resp.Request)
			return httpbudget.DefaultResponseClassifier(resp)
		}
		if status, _, err := send(t, tr, req); err != nil || status != 200 {
			t.Fatalf("RoundTrip() = %d, %v; want 200", status, err)
		}
		if len(seen) != 2 || seen[0] != req || seen[1] != req {
			t.Errorf("ClassifyResponse saw requests %p; want the caller's %p twice", seen, req)
		}
	})
	t.Run("NilRequest", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
		var seen *http.Request
		tr := &httpbudget.Transport{
			Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp := respond(r, 200, nil, "")
				resp.Request = nil
				return resp, nil
			}),
			ClassifyResponse: func(resp *http.Response) (budget.Kind, bool) {
				seen = resp.Request
				return httpbudget.DefaultResponseClassifier(resp)
			},
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if seen != req || resp.Request != req {
			t.Errorf("ClassifyResponse saw %p, RoundTrip returned %p; want the caller's %p", seen, resp.Request, req)
		}
	})
}

// A 101 Switching Protocols that ClassifyResponse retries has its body,
// the connection, closed before the retry and never read: it may never
// end.
func TestSwitchingProtocolsBodyNotRead(t *testing.T) {
	body := &unreadable{t: t}
	n := 0
	tr := &httpbudget.Transport{
		Retrier: &budget.Retrier{Jitter: func(time.Duration) time.Duration { return 0 }},
		Base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			n++
			if n == 1 {
				resp := respond(req, http.StatusSwitchingProtocols, nil, "")
				resp.Body = body
				return resp, nil
			}
			return respond(req, 200, nil, ""), nil
		}),
		ClassifyResponse: func(resp *http.Response) (budget.Kind, bool) {
			return budget.Transient, resp.StatusCode == http.StatusSwitchingProtocols
		},
	}
	req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	if status, _, err := send(t, tr, req); err != nil || status != 200 {
		t.Fatalf("RoundTrip() = %d, %v; want 200 on the retry", status, err)
	}
	if !body.closed {
		t.Error("the 101's body is open; want it closed before the retry")
	}
}

// An unreadable is a body that fails the test if it is read.
type unreadable struct {
	t      *testing.T
	closed bool
}

func (b *unreadable) Read([]byte) (int, error) {
	b.t.Error("the 101's body was read")
	return 0, io.EOF
}

func (b *unreadable) Close() error {
	b.closed = true
	return nil
}

// DefaultResponseClassifier retries 502 and 504 as Transient, 429 and 503
// as Throttled, and nothing else, a nil or empty response included.
func TestDefaultResponseClassifier(t *testing.T) {
	want := map[int]budget.Kind{502: budget.Transient, 504: budget.Transient, 429: budget.Throttled, 503: budget.Throttled}
	for code := -1; code < 1000; code++ {
		kind, retry := httpbudget.DefaultResponseClassifier(&http.Response{StatusCode: code})
		if w, ok := want[code]; kind != w || retry != ok {
			t.Errorf("DefaultResponseClassifier(%d) = %v, %v; want %v, %v", code, kind, retry, w, ok)
		}
	}
	if kind, retry := httpbudget.DefaultResponseClassifier(nil); kind != budget.FirstAttempt || retry {
		t.Errorf("DefaultResponseClassifier(nil) = %v, %v; want first, false", kind, retry)
	}
}

package httpbudget_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/httpbudget"
)

// A step is one answer of a scripted server.
type step struct {
	status     int
	retryAfter string // the Retry-After header, if set
	body       string
	hangUp     bool // close the connection without an answer
}

// A received is one request as the server saw it.
type received struct {
	method string
	header http.Header
	body   string
	at     time.Time
}

// A server is an httptest server on loopback that answers the i-th request
// with steps[i] (the last step repeats), and records what it receives and
// how many connections it accepts.
type server struct {
	*httptest.Server
	steps []step

	mu    sync.Mutex
	reqs  []received
	conns int
}

// serve starts a server that answers with steps; the test's end stops it.
func serve(t *testing.T, steps ...step) *server {
	t.Helper()
	s := &server{steps: steps}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.answer))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *server) answer(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	st := s.steps[min(len(s.reqs), len(s.steps)-1)]
	s.reqs = append(s.reqs, received{r.Method, r.Header.Clone(), string(body), time.Now()})
	s.mu.Unlock()
	if st.hangUp {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if st.retryAfter != "" {
		w.Header().Set("Retry-After", st.retryAfter)
	}
	w.WriteHeader(st.status)
	io.WriteString(w, st.body)
}

// received returns the requests the server has received.
func (s *server) received() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// connections returns how many connections the server has accepted.
func (s *server) connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// transport returns a Transport that reaches s through its own client's
// transport (whose idle connections s.Close closes) and runs r.
func (s *server) transport(r *budget.Retrier) *httpbudget.Transport {
	return &httpbudget.Transport{Base: s.Client().Transport, Retrier: r}
}

// get makes a GET request of s.
func (s *server) get(t *testing.T) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// send runs req through tr and returns the response's status code and
// body, read and closed; a status of 0 for an error.
func send(t *testing.T, tr http.RoundTripper, req *http.Request) (int, string, error) {
	t.Helper()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		if resp != nil {
			t.Errorf("RoundTrip() = %v, %v; want no response with an error", resp.Status, err)
		}
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("reading the body of %v: %v", resp.Status, err)
	}
	return resp.StatusCode, string(body), nil
}

// quick returns a Retrier on b with short waits: backoff ceilings of 1ms,
// 2ms, ... and server delays capped at 50ms.
func quick(b budget.Budget) *budget.Retrier {
	return &budget.Retrier{Budget: b, BaseDelay: time.Millisecond, MaxDelay: 50 * time.Millisecond}
}

// A recorder is a Budget that records what it is told and asked, and
// grants every retry unless deny is set.
type recorder struct {
	deny bool

	mu        sync.Mutex
	requests  int
	retries   []budget.Kind
	successes []budget.Kind
}

func (b *recorder) Request() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.requests++
}

func (b *recorder) Retry(k budget.Kind) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.retries = append(b.retries, k)
	return !b.deny
}

func (b *recorder) Success(k budget.Kind) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.successes = append(b.successes, k)
}

// check compares what b was told with what the test wants.
func (b *recorder) check(t *testing.T, requests int, retries, successes []budget.Kind) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.requests != requests {
		t.Errorf("budget told of %d requests; want %d", b.requests, requests)
	}
	if !slices.Equal(b.retries, retries) {
		t.Errorf("budget asked for retries %v; want %v", b.retries, retries)
	}
	if !slices.Equal(b.successes, successes) {
		t.Errorf("budget told of successes %v; want %v", b.successes, successes)
	}
}

// roundTripFunc is a RoundTripper in the test's process: no network, so
// that it runs inside a synctest bubble.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// respond returns a response to req with status, header and body.
func respond(req *http.Request, status int, header http.Header, body string) *http.Response {
	if header == nil {
		header = http.Header{}
	}
	return &http.Response{
		Status:     fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode: status,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  header,
		Body:    io.NopCloser(strings.NewReader(body)),
		Request: req,
	}
}

// A trackedBody is a response body that records how much was read of it
// and whether it was closed.
type trackedBody struct {
	r      io.Reader
	size   int
	read   atomic.Int64
	closed atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *trackedBody) Close() error {
	b.closed.Store(true)
	return nil
}

// drained reports whether b was read to its end.
func (b *trackedBody) drained() bool { return b.read.Load() == int64(b.size) }

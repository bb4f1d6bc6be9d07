package httpbudget_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/httpbudget"
)

// Retry through an http.Client under a token bucket shared by every call
// to one dependency: the server's first answer, 503, is retried.
func ExampleTransport() {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			http.Error(w, "warming up", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "hello")
	}))
	defer srv.Close()

	tb, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: &httpbudget.Transport{Retrier: &budget.Retrier{Budget: tb}}}

	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("%s %q after %d attempts\n", resp.Status, body, attempts.Load())
	fmt.Println("tokens left:", tb.Available()) // 5 charged for the throttled retry, refunded by its success
	// Output:
	// 200 OK "hello\n" after 2 attempts
	// tokens left: 500
}

// fixedRetries is a team's own retry loop, written against budget.Loop
// and nothing else of the budget package's: up to n attempts, a fixed wait
// between them, or the delay the server asked for, up to maxWait; no
// budget. It reads each failure as the adapters tell it: the verdict from
// budget.DefaultClassifier, the server's delay from a RetryAfter method.
type fixedRetries struct {
	n             int
	wait, maxWait time.Duration
}

func (l fixedRetries) Do(ctx context.Context, op func(context.Context, budget.Attempt) error) error {
	for n := 1; ; n++ {
		err := op(ctx, budget.Attempt{N: n})
		if err == nil {
			return nil
		}
		kind, retry := budget.DefaultClassifier(err)
		if !retry || n == l.n {
			return err
		}
		fmt.Printf("attempt %d: %v; a %v retry", n, err, kind)
		wait := l.wait
		var ra interface{ RetryAfter() time.Duration }
		if errors.As(err, &ra) {
			fmt.Printf(", the server asks for %v", ra.RetryAfter())
			wait = min(ra.RetryAfter(), l.maxWait)
		}
		fmt.Println()
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}

// Retry under a loop of your own: the Transport tells it which responses
// are failures, of which kind, and what delay the server asked for.
func ExampleTransport_ownLoop() {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch attempts.Add(1) {
		case 1:
			w.WriteHeader(http.StatusBadGateway)
		case 2:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			fmt.Fprintln(w, "hello")
		}
	}))
	defer srv.Close()

	loop := fixedRetries{n: 3, wait: time.Millisecond, maxWait: 10 * time.Millisecond}
	client := &http.Client{Transport: &httpbudget.Transport{Retrier: loop}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("%s %q after %d attempts\n", resp.Status, body, attempts.Load())
	// Output:
	// attempt 1: httpbudget: response 502 Bad Gateway; a transient retry
	// attempt 2: httpbudget: response 429 Too Many Requests; a throttled retry, the server asks for 1s
	// 200 OK "hello\n" after 3 attempts
}

// One budget per destination host, with budget.Keyed: a host that keeps
// failing spends its own budget, and the caller then gets its 503 at once,
// while calls to another host still retry.
func ExampleTransport_budgetFor() {
	var downAttempts atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downAttempts.Add(1)
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()

	perHost, err := budget.NewKeyed(budget.KeyedConfig[string, *budget.TokenBucket]{
		New: func(host string) (*budget.TokenBucket, error) {
			return budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 2, TransientCost: 1, ThrottledCost: 1})
		},
		MaxKeys:     10_000,
		IdleTimeout: 10 * time.Minute,
	})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: &httpbudget.Transport{
		Retrier: &budget.Retrier{BaseDelay: time.Millisecond},
		BudgetFor: func(req *http.Request) (budget.Budget, error) {
			return perHost.Get(req.URL.Host)
		},
	}}
	get := func(url string) {
		resp, err := client.Get(url)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s %q\n", resp.Status, strings.TrimSpace(string(body)))
	}

	get(down.URL) // 3 attempts, 2 retries: the host's budget is spent
	get(down.URL) // 1 attempt: the retry is denied
	fmt.Println("attempts on the failing host:", downAttempts.Load())
	get(up.URL)
	bDown, _ := perHost.Get(strings.TrimPrefix(down.URL, "http://"))
	bUp, _ := perHost.Get(strings.TrimPrefix(up.URL, "http://"))
	fmt.Println("tokens left:", bDown.Available(), bUp.Available())
	// Output:
	// 503 Service Unavailable "overloaded"
	// 503 Service Unavailable "overloaded"
	// attempts on the failing host: 4
	// 200 OK ""
	// tokens left: 0 2
}

// With RetryNonIdempotent, a POST is retried too, and every attempt
// carries the call's dedup key as its Idempotency-Key, so that the server
// can carry the request out once.
func ExampleTransport_retryNonIdempotent() {
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n := len(keys)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	client := &http.Client{Transport: &httpbudget.Transport{
		Retrier:            &budget.Retrier{BaseDelay: time.Millisecond},
		RetryNonIdempotent: true,
	}}
	resp, err := client.Post(srv.URL, "text/plain", strings.NewReader("order #1"))
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	fmt.Println(resp.Status, "after", len(keys), "attempts")
	fmt.Println("one key, on every attempt:", keys[0] != "" && keys[0] == keys[1])
	// Output:
	// 201 Created after 2 attempts
	// one key, on every attempt: true
}

// Retry 500 Internal Server Error, and every other 5xx but 501 Not
// Implemented, as go-retryablehttp's DefaultRetryPolicy does, on top of
// the default, which retries 502, 503, 504 and 429 only.
func ExampleResponseClassifier() {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) < 3 {
			http.Error(w, "oops", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "hello")
	}))
	defer srv.Close()

	retryable := func(resp *http.Response) (budget.Kind, bool) {
		if kind, ok := httpbudget.DefaultResponseClassifier(resp); ok {
			return kind, ok // 429 and 503 Throttled, with their Retry-After
		}
		if resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented {
			return budget.Transient, true
		}
		return budget.FirstAttempt, false
	}
	client := &http.Client{Transport: &httpbudget.Transport{
		Retrier:          &budget.Retrier{BaseDelay: time.Millisecond},
		ClassifyResponse: retryable,
	}}

	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("%s %q after %d attempts\n", resp.Status, body, attempts.Load())
	// Output:
	// 200 OK "hello\n" after 3 attempts
}

// Stop retrying the 503 of one host, which answers it only when it is
// truly down, and keep the default for every other host.
func ExampleResponseClassifier_perHost() {
	newServer := func(attempts *atomic.Int32) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if attempts.Add(1) == 1 {
				http.Error(w, "down", http.StatusServiceUnavailable)
			}
		}))
	}
	var downAttempts, otherAttempts atomic.Int32
	down := newServer(&downAttempts)
	defer down.Close()
	other := newServer(&otherAttempts)
	defer other.Close()

	downHost := down.Listener.Addr().String() // the host:port of its URLs
	client := &http.Client{Transport: &httpbudget.Transport{
		Retrier: &budget.Retrier{BaseDelay: time.Millisecond},
		ClassifyResponse: func(resp *http.Response) (budget.Kind, bool) {
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Request.URL.Host == downHost {
				return budget.FirstAttempt, false
			}
			return httpbudget.DefaultResponseClassifier(resp)
		},
	}}

	for _, srv := range []struct {
		name     string
		url      string
		attempts *atomic.Int32
	}{{"down", down.URL, &downAttempts}, {"other", other.URL, &otherAttempts}} {
		resp, err := client.Get(srv.url)
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Printf("%s: %s, attempts: %d\n", srv.name, resp.Status, srv.attempts.Load())
	}
	// Output:
	// down: 503 Service Unavailable, attempts: 1
	// other: 200 OK, attempts: 2
}

// Every error of Base is retried by default, a certificate the client does
// not trust included, though no retry mends it. A Retrier.Classify that
// finds the certificate errors stops that: one attempt, not three.
func ExampleTransport_certificateErrors() {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the server's "TLS handshake error" lines
	srv.StartTLS()
	defer srv.Close()

	notCertificate := func(err error) (budget.Kind, bool) {
		var certErr *tls.CertificateVerificationError
		if errors.As(err, &certErr) ||
			errors.As(err, new(x509.UnknownAuthorityError)) ||
			errors.As(err, new(x509.HostnameError)) ||
			errors.As(err, new(x509.CertificateInvalidError)) {
			return budget.FirstAttempt, false
		}
		return budget.DefaultClassifier(err)
	}

	for _, classify := range []struct {
		name string
		f    budget.Classifier
	}{{"default", nil}, {"notCertificate", notCertificate}} {
		attempts := 0
		base := &http.Transport{} // the system's roots, which do not include the test server's
		client := &http.Client{Transport: &httpbudget.Transport{
			Base: base,
			Retrier: &budget.Retrier{
				BaseDelay: time.Millisecond,
				Classify:  classify.f,
				Hooks:     budget.Hooks{OnAttempt: func(context.Context, budget.Attempt) { attempts++ }},
			},
		}}
		_, err := client.Get(srv.URL)
		base.CloseIdleConnections()
		var unknown x509.UnknownAuthorityError
		fmt.Printf("%s: attempts: %d, an unknown authority: %v\n", classify.name, attempts, errors.As(err, &unknown))
	}
	// Output:
	// default: attempts: 3, an unknown authority: true
	// notCertificate: attempts: 1, an unknown authority: true
}

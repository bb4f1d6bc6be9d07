package httpbudget_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/httpbudget"
)

// A successful GET over loopback, through an http.Client with a
// transport like http.DefaultTransport, bare and wrapped in a Transport
// with a token bucket: the difference is the Transport's cost on the path
// most requests take. Both drain and close each body, so that every
// request reuses one connection.
func BenchmarkRoundTrip(b *testing.B) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tb, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		wrap func(http.RoundTripper) http.RoundTripper
	}{
		{"bare", func(base http.RoundTripper) http.RoundTripper { return base }},
		{"httpbudget", func(base http.RoundTripper) http.RoundTripper {
			return &httpbudget.Transport{Base: base, Retrier: &budget.Retrier{Budget: tb}}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			base := http.DefaultTransport.(*http.Transport).Clone()
			defer base.CloseIdleConnections()
			client := &http.Client{Transport: bc.wrap(base)}
			req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
			if err != nil {
				b.Fatal(err)
			}
			before := conns.Load()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("GET = %s; want 200 OK", resp.Status)
				}
			}
			b.StopTimer()
			if n := conns.Load() - before; n != 1 {
				b.Errorf("the requests opened %d connections; want 1, reused", n)
			}
		})
	}
}

// A successful request through the Transport to a Base that answers at
// once, in the process, with one response made once: the Transport's own
// cost, without the network's noise, with the default classification and
// with a ClassifyResponse that wraps it.
func BenchmarkTransportSuccess(b *testing.B) {
	tb, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	if err != nil {
		b.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	if err != nil {
		b.Fatal(err)
	}
	resp := respond(req, http.StatusOK, nil, "")
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	for _, bc := range []struct {
		name string
		tr   *httpbudget.Transport
	}{
		{"default", &httpbudget.Transport{Base: base, Retrier: &budget.Retrier{Budget: tb}}},
		{"ClassifyResponse", &httpbudget.Transport{Base: base, Retrier: &budget.Retrier{Budget: tb}, ClassifyResponse: retry500}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.tr.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

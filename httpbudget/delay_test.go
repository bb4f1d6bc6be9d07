package httpbudget_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/httpbudget"
)

// backoff is the wait every test Retrier's jitter picks: a retry after
// exactly backoff waited the Retrier's backoff, not a server's delay.
const backoff = 7 * time.Millisecond

// The wait before a retry, to the nanosecond on a bubble's clock: the
// delay Retry-After asks for on a 429 or 503, capped at MaxDelay, and the
// backoff for a value that asks for none, and on a 502 or 504.
func TestRetryAfterWaits(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		value  func(now time.Time) string
		want   time.Duration
	}{
		{"Seconds429", 429, func(time.Time) string { return "2" }, 2 * time.Second},
		{"Seconds503", 503, func(time.Time) string { return "2" }, 2 * time.Second},
		{"Date", 503, func(now time.Time) string { return now.Add(3 * time.Second).UTC().Format(http.TimeFormat) }, 3 * time.Second},
		{"CappedByMaxDelay", 429, func(time.Time) string { return "86400" }, time.Minute},
		{"DateInThePast", 503, func(now time.Time) string { return now.Add(-time.Hour).UTC().Format(http.TimeFormat) }, backoff},
		{"Zero", 429, func(time.Time) string { return "0" }, backoff},
		{"Garbage", 429, func(time.Time) string { return "in a while" }, backoff},
		{"None", 503, func(time.Time) string { return "" }, backoff},
		{"IgnoredOn502", 502, func(time.Time) string { return "2" }, backoff},
		{"IgnoredOn504", 504, func(time.Time) string { return "2" }, backoff},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var starts []time.Time
				tr := &httpbudget.Transport{
					Retrier: &budget.Retrier{MaxDelay: time.Minute, Jitter: func(time.Duration) time.Duration { return backoff }},
					Base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
						starts = append(starts, time.Now())
						if len(starts) > 1 {
							return respond(req, 200, nil, ""), nil
						}
						h := http.Header{}
						if v := tt.value(time.Now()); v != "" {
							h.Set("Retry-After", v)
						}
						return respond(req, tt.status, h, ""), nil
					}),
				}
				req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
				if status, _, err := send(t, tr, req); err != nil || status != 200 {
					t.Fatalf("RoundTrip() = %d, %v; want 200 on the retry", status, err)
				}
				if len(starts) != 2 {
					t.Fatalf("%d attempts; want 2", len(starts))
				}
				if gap := starts[1].Sub(starts[0]); gap != tt.want {
					t.Errorf("retried %v after the %d; want %v", gap, tt.status, tt.want)
				}
			})
		})
	}
}

// A cancel during the wait returns at once, with context.Canceled, and
// the response held for the retry closed.
func TestCancelDuringWaitReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := &trackedBody{r: strings.NewReader("busy"), size: 4}
		attempts := 0
		tr := &httpbudget.Transport{
			Retrier: &budget.Retrier{MaxDelay: 2 * time.Hour},
			Base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
				attempts++
				resp := respond(req, 503, http.Header{"Retry-After": {"3600"}}, "")
				resp.Body = body
				return resp, nil
			}),
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://example.test/", nil)
		var err error
		var returned time.Time
		done := make(chan struct{})
		go func() {
			defer close(done)
			var resp *http.Response
			resp, err = tr.RoundTrip(req)
			returned = time.Now()
			if resp != nil {
				t.Errorf("RoundTrip() = %v, %v; want no response", resp.Status, err)
			}
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		cancelled := time.Now()
		cancel()
		<-done
		if !errors.Is(err, context.Canceled) {
			t.Errorf("RoundTrip() = %v; want an error wrapping context.Canceled", err)
		}
		if d := returned.Sub(cancelled); d != 0 {
			t.Errorf("RoundTrip() returned %v after the cancel; want at once", d)
		}
		if attempts != 1 || !body.closed.Load() {
			t.Errorf("%d attempts, the 503's body closed %v; want 1 attempt and the body closed", attempts, body.closed.Load())
		}
	})
}

// The budget is charged by the kind of each failure, as the Retrier asks,
// across kinds in one call.
func TestKindsCharged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		statuses := []int{429, 502, 503, 504, 200}
		n := 0
		b := &recorder{}
		tr := &httpbudget.Transport{
			Retrier: &budget.Retrier{Budget: b, MaxAttempts: len(statuses)},
			Base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
				n++
				return respond(req, statuses[n-1], nil, ""), nil
			}),
		}
		req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
		if status, _, err := send(t, tr, req); err != nil || status != 200 {
			t.Fatalf("RoundTrip() = %d, %v; want 200", status, err)
		}
		b.check(t, 1, []budget.Kind{budget.Throttled, budget.Transient, budget.Throttled, budget.Transient}, []budget.Kind{budget.Transient})
	})
}

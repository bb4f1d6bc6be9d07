package httpbudget_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/httpbudget"
	"github.com/retrybudget/retrybudget/stress"
)

// inProcess returns a Base whose attempts run op in the test's process,
// on the attempt's context, and which maps op's error onto a response as a
// server would: nil to 200, a *stress.RetryAfterError to 429 with its
// delay as Retry-After in whole seconds (rounded up: a server cannot ask
// for less than it needs), stress.ErrTransient to 502, stress.ErrPermanent
// to 400, and any other error (a context's, as when op honours ctx) to
// that error, as a failed connection.
func inProcess(op func(context.Context) error) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		err := op(req.Context())
		var ra *stress.RetryAfterError
		switch {
		case err == nil:
			return respond(req, http.StatusOK, nil, ""), nil
		case errors.Is(err, stress.ErrPermanent):
			return respond(req, http.StatusBadRequest, nil, err.Error()), nil
		case errors.As(err, &ra):
			secs := (ra.Delay + time.Second - 1) / time.Second
			h := http.Header{"Retry-After": {strconv.FormatInt(int64(secs), 10)}}
			return respond(req, http.StatusTooManyRequests, h, err.Error()), nil
		case errors.Is(err, stress.ErrTransient):
			return respond(req, http.StatusBadGateway, nil, err.Error()), nil
		}
		return nil, err
	})
}

// loopError turns the response RoundTrip returned into the error of the
// check: nil for 200, else an error that wraps the check's error for the
// status.
func loopError(resp *http.Response) error {
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusBadRequest:
		return fmt.Errorf("httpbudget test: %s: %w", resp.Status, stress.ErrPermanent)
	case http.StatusTooManyRequests:
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return fmt.Errorf("httpbudget test: %s: %w", resp.Status, &stress.RetryAfterError{Delay: time.Duration(secs) * time.Second})
	case http.StatusBadGateway:
		return fmt.Errorf("httpbudget test: %s: %w", resp.Status, stress.ErrTransient)
	}
	return fmt.Errorf("httpbudget test: unexpected %s", resp.Status)
}

// transportLoop adapts the Transport to the loop checks: each call is one
// RoundTrip of a GET through a Transport whose Retrier is configured from
// the check's Settings, as stress.RetrierLoop does, with the check's
// budget, and whose Base is inProcess(op).
func transportLoop() stress.Loop {
	return stress.Loop{
		Name: "httpbudget.Transport",
		Call: func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
			r := &budget.Retrier{Budget: b, MaxAttempts: s.MaxAttempts, BaseDelay: s.BaseDelay, MaxDelay: s.MaxDelay, MaxElapsed: s.MaxElapsed}
			switch {
			case s.FixedDelay:
				r.Jitter = func(time.Duration) time.Duration { return s.BaseDelay }
			case s.NoJitter:
				r.Jitter = func(ceiling time.Duration) time.Duration { return ceiling }
			}
			tr := &httpbudget.Transport{Base: inProcess(op), Retrier: r}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://loop.test/", nil)
			if err != nil {
				return err
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			return loopError(resp)
		},
		Skip: map[string]string{
			"HedgeLosersCancelled": "the Transport runs a budget.Retrier, which does not hedge",
			"UncappedLoopEnds":     "the Transport runs a budget.Retrier, which always has an attempt limit",
			"NoAttemptOnExpiredDeadline": "its premise is a server delay of 1ms to 500ms honoured to the nanosecond, " +
				"so that a wait ends at the deadline's instant, and Retry-After carries whole seconds only (RFC 9110, section 10.2.3): " +
				"the test's server rounds each delay up to 1s, a wait that passes the deadline 2ms to 1s away: the Transport gives up at once " +
				"(budget.ErrNoTime) or, when the check hides the deadline, the deadline cuts the wait short, and no wait ends at its instant. " +
				"The rule the check guards, no attempt on a context whose Err is set, " +
				"is kept by budget.Retrier, which the Transport runs unchanged and stress.RetrierLoop checks",
		},
	}
}

// The Transport keeps every promise of a retry loop, each check in a child
// process; the one it skips says why.
func TestLoopChecks(t *testing.T) {
	budgettest.RunLoop(t, transportLoop())
}

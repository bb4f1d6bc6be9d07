package stress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The UncappedLoopEnds check. With no attempt limit (Settings.NoAttemptCap,
// a library's Attempts(0) or MaxRetries(-1)) only the other ends of a loop
// stop it: a permanent error, a denial, a cancel. Code that is reached in
// no other mode breaks them: avast/retry-go v4.3.2 retried an unrecoverable
// error for ever in that mode, and returned nil on a cancel.

// uncappedMax is the MaxAttempts the check sets beside NoAttemptCap: a loop
// that ignores NoAttemptCap stops there, and the check says so.
const uncappedMax = 2

func checkUncappedLoopEnds(t *testing.T, l Loop) {
	s := Settings{NoAttemptCap: true, MaxAttempts: uncappedMax, BaseDelay: time.Millisecond, MaxDelay: time.Second, FixedDelay: true, NoJitter: true}
	paths := []struct {
		name   string
		grants int // retries the budget grants
		// op fails attempt n; cancel cancels the call.
		op func(n int, cancel func()) error
		// premise: at least so many attempts
		attempts int
		check    func(t *testing.T, saw string, n, asks int, res result, cancelledAt time.Time)
	}{
		{"cancelled during the wait", grantAll, func(n int, cancel func()) error {
			if n == 5 {
				time.AfterFunc(500*time.Microsecond, cancel) // into the 1ms wait
			}
			return ErrTransient
		}, 5, func(t *testing.T, saw string, n, _ int, res result, at time.Time) {
			if !errors.Is(res.err, context.Canceled) {
				t.Errorf("%s; want an error wrapping context.Canceled after a cancel during the wait: a caller that is told nil takes a call that never succeeded for a success", saw)
			}
			if n > 5 {
				t.Errorf("%s; want no attempt after the cancel during the wait after the fifth", saw)
			}
			if d := res.at.Sub(at); !at.IsZero() && d > 0 {
				t.Errorf("%s; returned %v after the cancel, want at once", saw, d)
			}
		}},
		{"a permanent error", grantAll, func(n int, cancel func()) error {
			if n >= 12 {
				cancel() // a loop that retries it for ever ends here
			}
			if n >= 4 {
				return ErrPermanent
			}
			return ErrTransient
		}, 4, func(t *testing.T, saw string, n, _ int, res result, _ time.Time) {
			if n > 4 {
				t.Errorf("%s; want no retry of the permanent error of attempt 4: without an attempt limit, a loop that retries it does so until the caller gives up", saw)
			}
			if n == 4 && !errors.Is(res.err, ErrPermanent) {
				t.Errorf("%s; want the permanent error returned", saw)
			}
		}},
		{"a denial", 3, func(int, func()) error { return ErrTransient }, 4, func(t *testing.T, saw string, n, asks int, res result, _ time.Time) {
			if asks > 4 || n > 4 {
				t.Errorf("%s; want the call to end at the denial of the fourth retry: a loop that waits and asks again keeps the call open, and asks on every wait, for as long as the budget is empty", saw)
			}
			if res.err == nil {
				t.Errorf("%s; want an error after a denial", saw)
			}
		}},
	}
	for _, p := range paths {
		t.Run(strings.ReplaceAll(p.name, " ", "_"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var mu sync.Mutex
				var cancelledAt time.Time
				stop := func() {
					mu.Lock()
					if cancelledAt.IsZero() {
						cancelledAt = time.Now()
					}
					mu.Unlock()
					cancel()
				}
				sp := &askSpy{grants: p.grants, cancel: stop}
				r := newRecorder(t, l, func(_ context.Context, n int) error { return p.op(n, stop) })
				r.own = cancel
				res := r.call(ctx, sp, s)
				r.drain()
				if r.spinning() {
					return
				}
				n, asks := r.counts().n, sp.asked()
				saw := fmt.Sprintf("%s, %s: %d attempts, %d asks of the budget, returned %v", l.Name, p.name, n, asks, res.err)
				if n <= uncappedMax {
					unmet(t, fmt.Sprintf("more than MaxAttempts (%d) attempts under Settings.NoAttemptCap, %d in all", uncappedMax, p.attempts),
						saw+": the loop ignores NoAttemptCap (a loop with no such mode Skips UncappedLoopEnds)")
					return
				}
				if n < p.attempts {
					unmet(t, fmt.Sprintf("%d attempts under Settings.NoAttemptCap", p.attempts), saw)
					return
				}
				mu.Lock()
				at := cancelledAt
				mu.Unlock()
				p.check(t, saw, n, asks, res, at)
			})
		})
	}
}

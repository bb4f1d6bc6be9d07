package stress

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// The EverySuccessReported check. A budget that funds retries from
// successes (the AWS SDK's quota pays back a retry's cost and credits a
// first attempt, a token bucket refunds, a Throttle earns credit) hears of
// them only through Success. A loop that never tells it drains it for good
// in an outage; one that tells it twice, or of an attempt that failed,
// funds retries the dependency's health does not.

// successSpy is the budget of one call of EverySuccessReported: it grants
// every retry until denyAfter grants (never, when negative), and records
// what the loop tells it.
type successSpy struct {
	denyAfter int

	mu        sync.Mutex
	asks      int
	grants    int
	successes []budget.Kind
	returned  bool // set by the check once the call has returned
	late      []budget.Kind
}

func (s *successSpy) Request() {}

func (s *successSpy) Retry(k budget.Kind) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asks++
	if !k.IsRetry() || (s.denyAfter >= 0 && s.grants >= s.denyAfter) {
		return false
	}
	s.grants++
	return true
}

func (s *successSpy) Success(k budget.Kind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.returned {
		s.late = append(s.late, k)
		return
	}
	s.successes = append(s.successes, k)
}

// atReturn notes that the call has returned, and returns the successes
// told before it.
func (s *successSpy) atReturn() []budget.Kind {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.returned = true
	return append([]budget.Kind(nil), s.successes...)
}

func (s *successSpy) lateOnes() []budget.Kind {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]budget.Kind(nil), s.late...)
}

// A successPath is one call that EverySuccessReported makes.
type successPath struct {
	name string
	// op fails or succeeds attempt n; cancel cancels the call.
	op        func(ctx context.Context, n int, cancel func()) error
	denyAfter int // grants before the budget denies; negative: never
	attempts  int // the premise: so many attempts (any, when negative)
	hedged    bool
	want      []budget.Kind
	expected  string // the premise in words
}

// successPaths are the calls EverySuccessReported makes. Every wait is 1ms
// (FixedDelay), in a bubble.
func successPaths() []successPath {
	fail := func(errs ...error) func(context.Context, int, func()) error {
		return func(_ context.Context, n int, _ func()) error {
			if n <= len(errs) {
				return errs[n-1]
			}
			return nil
		}
	}
	throttled := &RetryAfterError{Delay: time.Millisecond}
	return []successPath{
		{name: "first attempt succeeds", op: fail(), denyAfter: -1, attempts: 1,
			want: []budget.Kind{budget.FirstAttempt}, expected: "1 attempt, which succeeds"},
		{name: "a transient retry succeeds", op: fail(ErrTransient), denyAfter: -1, attempts: 2,
			want: []budget.Kind{budget.Transient}, expected: "2 attempts: ErrTransient, then a success"},
		{name: "a throttled retry succeeds", op: fail(ErrTransient, throttled), denyAfter: -1, attempts: 3,
			want: []budget.Kind{budget.Throttled}, expected: "3 attempts: ErrTransient, a RetryAfterError of 1ms, then a success"},
		{name: "out of attempts", op: fail(ErrTransient, ErrTransient, ErrTransient), denyAfter: -1, attempts: 3,
			expected: "3 attempts, all failing with ErrTransient, under MaxAttempts 3"},
		{name: "permanent", op: fail(ErrPermanent), denyAfter: -1, attempts: 1,
			expected: "1 attempt failing with ErrPermanent"},
		{name: "denied", op: fail(ErrTransient, ErrTransient), denyAfter: 1, attempts: 2,
			expected: "2 attempts failing with ErrTransient, the second retry denied"},
		// The caller cancels while the first attempt fails, so the loop
		// finds the context done when it would wait: no RetryAfterError,
		// which a loop without server delays cannot honour.
		{name: "cancelled after a failure", denyAfter: -1, attempts: 1,
			op: func(_ context.Context, n int, cancel func()) error {
				if n == 1 {
					cancel()
					return ErrTransient
				}
				return nil
			},
			expected: "1 attempt failing with ErrTransient, the caller cancelling before it returns"},
		// A loop that hedges starts a second attempt while the first,
		// which ignores ctx, runs for 50ms; both succeed. The call has one
		// result: one Success. A loop that does not hedge sees the first.
		{name: "a hedge and its loser both succeed", denyAfter: -1, attempts: -1, hedged: true,
			op: func(ctx context.Context, n int, _ func()) error {
				if n == 1 {
					time.Sleep(50 * time.Millisecond)
				}
				return nil
			},
			expected: "1 attempt, or a hedge beside it"},
	}
}

// kindsEqual reports whether a and b hold the same kinds in the same order.
func kindsEqual(a, b []budget.Kind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func checkSuccessesReported(t *testing.T, l Loop) {
	s := Settings{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Hour, FixedDelay: true, NoJitter: true, HedgeDelay: 10 * time.Millisecond}
	for _, p := range successPaths() {
		t.Run(strings.ReplaceAll(p.name, " ", "_"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				sp := &successSpy{denyAfter: p.denyAfter}
				r := newRecorder(t, l, func(ctx context.Context, n int) error { return p.op(ctx, n, cancel) })
				r.own = cancel
				res := r.call(ctx, sp, s)
				told := sp.atReturn()
				r.drain()
				synctest.Wait()
				if r.spinning() {
					return
				}
				c := r.counts()
				want := p.want
				if p.hedged {
					// One Success, of the first attempt's kind when
					// there was no hedge, of either kind when there was.
					want = []budget.Kind{budget.FirstAttempt}
					if c.peak > 1 && len(told) == 1 {
						want = told
					}
				}
				if n := c.n; p.attempts >= 0 && n != p.attempts {
					unmet(t, p.expected, fmt.Sprintf("%s made %d attempts (an adapter must honour MaxAttempts, FixedDelay and NoJitter)", l.Name, n))
					return
				}
				got := fmt.Sprintf("%d attempts, returned %v; Success told of %s before the call returned", c.n, res.err, kinds(told))
				late := sp.lateOnes()
				switch {
				case len(want) == 0 && len(told)+len(late) > 0:
					t.Errorf("%s, %s: %s, and of %s after; want no Success: no attempt succeeded, and a Success the loop did not see funds retries the dependency's health does not",
						l.Name, p.name, got, kinds(late))
				case len(want) == 0:
				case len(told) == 0 && len(late) > 0:
					t.Errorf("%s, %s: %s, and of %s after; want Success(%v) before the call returns", l.Name, p.name, got, kinds(late), want[0])
				case len(told) == 0:
					t.Errorf("%s, %s: %s; want Success(%v) once: a budget that funds retries from successes (a refund, a credit, the AWS quota's payback) is never funded by this loop, and an outage drains it for good",
						l.Name, p.name, got, want[0])
				case len(told)+len(late) > 1:
					t.Errorf("%s, %s: %s, and of %s after; want Success(%v) exactly once: each extra one funds a retry no success earned",
						l.Name, p.name, got, kinds(late), want[0])
				case !kindsEqual(told, want):
					t.Errorf("%s, %s: %s; want Success(%v), the kind of the attempt that succeeded: a budget refunds a retry and credits a first attempt differently",
						l.Name, p.name, got, want[0])
				}
			})
		})
	}
}

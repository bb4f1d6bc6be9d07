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

// The EveryFailureCounted check. A budget that counts failures
// (budget.FailureCounter: gRPC's retry throttling, budget.Throttle) takes
// a token for every retryable failure, the last attempt's included. A loop
// tells it through Retry for a failure after which it asks for a retry, and
// through Failed for one after which it gives up without asking: out of
// attempts, or no time left for the next wait. A loop that tells it nothing
// of those leaves the tokens of every call's last failure with the budget,
// and grants retries gRPC's own throttling would refuse.

// failureSpy is the budget of one call of EveryFailureCounted: it grants
// every retry, and counts what the loop tells it.
type failureSpy struct {
	mu     sync.Mutex
	asks   []budget.Kind // Retry calls, by kind
	failed []budget.Kind // Failed calls, by kind
}

var _ budget.FailureCounter = (*failureSpy)(nil)

func (s *failureSpy) Request()            {}
func (s *failureSpy) Success(budget.Kind) {}

func (s *failureSpy) Retry(k budget.Kind) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asks = append(s.asks, k)
	return k.IsRetry()
}

func (s *failureSpy) Failed(k budget.Kind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = append(s.failed, k)
}

// told returns the kinds asked for and failed so far.
func (s *failureSpy) told() (asks, failed []budget.Kind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]budget.Kind(nil), s.asks...), append([]budget.Kind(nil), s.failed...)
}

// kinds lists ks, for a message.
func kinds(ks []budget.Kind) string {
	if len(ks) == 0 {
		return "none"
	}
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = k.String()
	}
	return strings.Join(parts, ", ")
}

// A failurePath is one call that EveryFailureCounted makes.
type failurePath struct {
	name string
	s    Settings
	// deadline, if positive, is the call's context's deadline.
	deadline time.Duration
	op       func(ctx context.Context, n int) error
	// failures is the number of retryable failures the call meets when
	// the loop keeps its settings; the premise is that many attempts.
	failures int
	// retryable says whether the failures are retryable; a permanent
	// failure must reach the budget through neither Retry nor Failed.
	retryable bool
	expected  string // the premise in words
}

// failurePaths are the calls EveryFailureCounted makes.
func failurePaths() []failurePath {
	transient := func(context.Context, int) error { return ErrTransient }
	return []failurePath{
		{
			name:      "out of attempts",
			s:         Settings{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Second, FixedDelay: true, NoJitter: true},
			op:        transient,
			failures:  3,
			retryable: true,
			expected:  "3 attempts, all failing with ErrTransient, under MaxAttempts 3",
		},
		{
			name: "out of attempts after a server delay",
			s:    Settings{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Second, FixedDelay: true, NoJitter: true},
			op: func(context.Context, int) error {
				return &RetryAfterError{Delay: time.Millisecond}
			},
			failures:  2,
			retryable: true,
			expected:  "2 attempts, all failing with a RetryAfterError of 1ms, under MaxAttempts 2",
		},
		{
			// The first wait (1h) would reach the deadline (1s): the loop
			// gives up at once without asking, or asks and gives up, or
			// (GiveUpBeforeDeadline fails it) waits into the deadline.
			name:      "no time left",
			s:         Settings{MaxAttempts: 2, BaseDelay: time.Hour, MaxDelay: time.Hour, FixedDelay: true, NoJitter: true},
			deadline:  time.Second,
			op:        transient,
			failures:  1,
			retryable: true,
			expected:  "1 attempt failing with ErrTransient, whose next wait (1h) passes the deadline (1s)",
		},
		{
			name:     "permanent",
			s:        Settings{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Second, FixedDelay: true, NoJitter: true},
			op:       func(context.Context, int) error { return ErrPermanent },
			failures: 1,
			expected: "1 attempt failing with ErrPermanent",
		},
	}
}

func checkFailuresCounted(t *testing.T, l Loop) {
	for _, p := range failurePaths() {
		t.Run(strings.ReplaceAll(p.name, " ", "_"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				if p.deadline > 0 {
					ctx, cancel = context.WithTimeout(context.Background(), p.deadline)
				}
				defer cancel()
				sp := &failureSpy{}
				r := newRecorder(t, l, p.op)
				defer r.drain()
				r.call(ctx, sp, p.s)
				if r.spinning() {
					return
				}
				n := r.counts().n
				asks, failed := sp.told()
				if n != p.failures {
					unmet(t, p.expected, fmt.Sprintf("%s made %d attempts", l.Name, n))
					return
				}
				got := fmt.Sprintf("%d attempts; Retry asked for %s; Failed told of %s", n, kinds(asks), kinds(failed))
				if !p.retryable {
					if len(asks)+len(failed) != 0 {
						t.Errorf("%s, %s: %s; want neither for a failure that is not retryable", l.Name, p.name, got)
					}
					return
				}
				for _, k := range failed {
					if !k.IsRetry() {
						t.Errorf("%s, %s: %s; Failed of %v, which is not a retry kind, counts nothing", l.Name, p.name, got, k)
					}
				}
				switch {
				case len(asks)+len(failed) < p.failures:
					t.Errorf("%s, %s: %s; want each of the %d retryable failures told once, through Retry or, when no retry is asked for after it, through Failed (budget.FailureCounter): a budget that counts failures, such as gRPC's throttling, keeps the tokens of every call's last failure",
						l.Name, p.name, got, p.failures)
				case len(asks)+len(failed) > p.failures:
					t.Errorf("%s, %s: %s; want each of the %d retryable failures told once, through Retry or through Failed, not both",
						l.Name, p.name, got, p.failures)
				}
			})
		})
	}
}

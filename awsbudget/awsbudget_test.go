package awsbudget_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/retrybudget/retrybudget/awsbudget"
	"github.com/retrybudget/retrybudget/budget"
)

// The errors a fake service answers with, as the SDK classifies them: a
// throttling code and a retryable timeout code.
var (
	errThrottled = &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
	errTimeout   = &smithy.GenericAPIError{Code: "RequestTimeoutException", Message: "timed out"}
	errInvalid   = &smithy.GenericAPIError{Code: "ValidationException", Message: "bad input", Fault: smithy.FaultClient}
)

// call runs one operation through a smithy stack holding the SDK's own
// retry middleware (aws/retry's Attempt, with retry.Standard) around a
// fake handler that answers with answers[i] on attempt i (nil: success),
// and CountRequests when requests is set. It returns the operation's error
// and the number of attempts, number first.
func call(ctx context.Context, t *testing.T, rl retry.RateLimiter, requests budget.Budget, answers ...error) (int, error) {
	t.Helper()
	return callThen(ctx, t, rl, requests, nil, answers...)
}

// callThen is call, with then run after each attempt, before the attempt
// returns its answer; the attempt's number is its argument.
func callThen(ctx context.Context, t *testing.T, rl retry.RateLimiter, requests budget.Budget, then func(n int), answers ...error) (int, error) {
	t.Helper()
	r := retry.NewStandard(func(o *retry.StandardOptions) {
		o.RateLimiter = rl
		o.MaxAttempts = len(answers)
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	})
	stack := middleware.NewStack("Op", smithyhttp.NewStackRequest)
	if err := stack.Finalize.Add(retry.NewAttemptMiddleware(r, smithyhttp.RequestCloner), middleware.After); err != nil {
		t.Fatal(err)
	}
	if requests != nil {
		if err := awsbudget.CountRequests(requests)(stack); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	h := middleware.DecorateHandler(middleware.HandlerFunc(func(context.Context, any) (any, middleware.Metadata, error) {
		n++
		if n > len(answers) {
			t.Fatalf("attempt %d, but only %d answers", n, len(answers))
		}
		if then != nil {
			then(n)
		}
		return nil, middleware.Metadata{}, answers[n-1]
	}), stack)
	_, _, err := h.Handle(ctx, struct{}{})
	return n, err
}

// spy records what it is told, and grants while it has grants left.
type spy struct {
	mu   sync.Mutex
	left int
	log  []string
}

func (s *spy) note(f string, a ...any) {
	s.mu.Lock()
	s.log = append(s.log, fmt.Sprintf(f, a...))
	s.mu.Unlock()
}
func (s *spy) Request()              { s.note("request") }
func (s *spy) Success(k budget.Kind) { s.note("success %v", k) }
func (s *spy) Retry(k budget.Kind) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.left > 0
	if ok {
		s.left--
	}
	s.log = append(s.log, fmt.Sprintf("retry %v %v", k, ok))
	return ok
}

// Through the SDK's retry middleware: a throttling error costs a Throttled
// retry, a timeout a Transient one, the retry's success goes back as a
// Success of its kind, a first attempt's as Success(FirstAttempt), and
// CountRequests tells of each operation once.
func TestThroughTheSDKsRetryMiddleware(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		left     int
		answers  []error
		attempts int
		want     []string
	}{
		{"FirstAttemptSucceeds", 5, []error{nil}, 1, []string{"request", "success first"}},
		{"TimeoutThenThrottledThenSuccess", 5, []error{errTimeout, errThrottled, nil}, 3,
			[]string{"request", "retry transient true", "retry throttled true", "success throttled"}},
		{"Denied", 0, []error{errThrottled, nil}, 1, []string{"request", "retry throttled false"}},
		{"NotRetryable", 5, []error{errInvalid, nil}, 1, []string{"request"}},
		{"RetryFailsToo", 5, []error{errTimeout, errTimeout}, 2, []string{"request", "retry transient true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &spy{left: tt.left}
			n, err := call(ctx, t, awsbudget.New(s), s, tt.answers...)
			if n != tt.attempts {
				t.Errorf("%d attempts, want %d (error %v)", n, tt.attempts, err)
			}
			if !reflect.DeepEqual(s.log, tt.want) {
				t.Errorf("the budget was told %q, want %q", s.log, tt.want)
			}
			if tt.name == "Denied" {
				var q ratelimit.QuotaExceededError
				if !errors.Is(err, budget.ErrDenied) || !errors.As(err, &q) || q.Requested != 5 || !errors.Is(err, errThrottled) {
					t.Errorf("a denied retry returned %v; want budget.ErrDenied, the SDK's QuotaExceededError for 5 tokens and the service's error", err)
				}
			}
		})
	}
}

// A ThrottlingRetryCost set in the SDK's options is the adapter's too.
func TestCustomThrottlingCost(t *testing.T) {
	s := &spy{left: 5}
	rl := &awsbudget.RateLimiter{Budget: s, ThrottlingRetryCost: 2}
	for _, cost := range []uint{2, 5, 14} {
		release, err := rl.GetToken(context.Background(), cost)
		if err != nil {
			t.Fatal(err)
		}
		if err := release(); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"retry throttled true", "success throttled", "retry transient true", "success transient", "retry transient true", "success transient"}
	if !reflect.DeepEqual(s.log, want) {
		t.Errorf("the budget was told %q, want %q", s.log, want)
	}
}

// downBudget is a ContextBudget whose store is down: it grants nothing.
type downBudget struct{ spy }

var errDown = errors.New("store down")

func (d *downBudget) RequestContext(context.Context) error { return errDown }
func (d *downBudget) RetryContext(context.Context, budget.Kind) (bool, error) {
	return false, errDown
}
func (d *downBudget) SuccessContext(context.Context, budget.Kind) error { return errDown }

// A budget that cannot answer is not a denial, and a budget the SDK
// cannot serve is refused with a reason, never a panic.
func TestErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := awsbudget.New(&downBudget{}).GetToken(ctx, 14); !errors.Is(err, budget.ErrBudgetUnavailable) || !errors.Is(err, errDown) || errors.Is(err, budget.ErrDenied) {
		t.Errorf("GetToken on a budget that is down: %v; want ErrBudgetUnavailable with the budget's error, not ErrDenied", err)
	}
	inflight, err := budget.NewInFlight(budget.DefaultInFlightConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		rl   *awsbudget.RateLimiter
		want error
	}{
		{"Nil", nil, awsbudget.ErrNoBudget},
		{"ZeroValue", &awsbudget.RateLimiter{}, awsbudget.ErrNoBudget},
		{"InFlight", awsbudget.New(inflight), awsbudget.ErrInFlight},
	} {
		if _, err := tt.rl.GetToken(ctx, 14); !errors.Is(err, tt.want) {
			t.Errorf("%s: GetToken = %v, want %v", tt.name, err, tt.want)
		}
		if err := tt.rl.AddTokens(1); !errors.Is(err, tt.want) {
			t.Errorf("%s: AddTokens = %v, want %v", tt.name, err, tt.want)
		}
	}
	if !errors.Is(awsbudget.ErrInFlight, errors.ErrUnsupported) {
		t.Error("ErrInFlight does not wrap errors.ErrUnsupported")
	}
	stack := middleware.NewStack("Op", smithyhttp.NewStackRequest)
	if err := awsbudget.CountRequests(inflight)(stack); !errors.Is(err, awsbudget.ErrInFlight) {
		t.Errorf("CountRequests(an InFlight) = %v, want ErrInFlight", err)
	}
	if err := awsbudget.CountRequests(nil)(stack); !errors.Is(err, awsbudget.ErrNoBudget) {
		t.Errorf("CountRequests(nil) = %v, want ErrNoBudget", err)
	}
}

// With the SDK's numbers, budget.TokenBucket behind the adapter grants what
// the SDK's own quota grants, retry for retry, through the SDK's loop.
func TestSameAnswersAsTheSDKsQuota(t *testing.T) {
	tb, err := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 500, TransientCost: 14, ThrottledCost: 5, SuccessBonus: 1})
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := awsbudget.New(tb), ratelimit.NewTokenRateLimit(500)
	ctx := context.Background()
	answers := [][]error{{errTimeout, errTimeout, errTimeout}, {errThrottled, errThrottled, nil}, {nil}, {errTimeout, nil}}
	for i := range 300 {
		a := answers[i%len(answers)]
		nOurs, errOurs := call(ctx, t, ours, nil, a...)
		nTheirs, errTheirs := call(ctx, t, theirs, nil, a...)
		if nOurs != nTheirs || (errOurs == nil) != (errTheirs == nil) {
			t.Fatalf("call %d: %d attempts (%v) through the adapter, %d (%v) through the SDK's quota", i, nOurs, errOurs, nTheirs, errTheirs)
		}
		if got, want := tb.Available(), float64(theirs.Remaining()); got != want {
			t.Fatalf("call %d: the budget holds %v, the SDK's quota %v", i, got, want)
		}
	}
	if tb.Stats().Denied == 0 {
		t.Error("no retry was denied: the comparison never reached an empty quota")
	}
}

// A retry asked for on a context that is already done is refused, and
// charges nothing, as the SDK's own quota (ratelimit.TokenRateLimit)
// refuses it: an attempt during which the caller cancels, or whose
// deadline passes, fails with a retryable error, and the SDK asks for a
// retry token on the done context; the budget must be left as it was. Each
// case runs the same calls through the SDK's loop with budget.TokenBucket
// (the SDK's numbers) behind the adapter and with the SDK's quota, and
// compares the balances and the attempts after every call.
func TestDoneContextChargesNothing(t *testing.T) {
	for _, tt := range []struct {
		name string
		end  func(context.CancelFunc) // ends the call's context during its first attempt
		want error
	}{
		{"cancelled", func(cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"deadline passed", nil, context.DeadlineExceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tb, err := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 500, TransientCost: 14, ThrottledCost: 5, SuccessBonus: 1})
			if err != nil {
				t.Fatal(err)
			}
			ours, theirs := awsbudget.New(tb), ratelimit.NewTokenRateLimit(500)
			for i, answers := range [][]error{{errTimeout, errTimeout}, {errThrottled, errThrottled}, {errTimeout, nil}} {
				var n [2]int
				var errs [2]error
				for j, rl := range []retry.RateLimiter{ours, theirs} {
					ctx, cancel := context.WithCancel(context.Background())
					if tt.end == nil {
						// The deadline passes during the first attempt, which
						// waits for it.
						ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
					}
					n[j], errs[j] = callThen(ctx, t, rl, nil, func(int) {
						if tt.end != nil {
							tt.end(cancel)
							return
						}
						for ctx.Err() == nil {
							time.Sleep(time.Millisecond)
						}
					}, answers...)
					cancel()
				}
				if n[0] != n[1] {
					t.Errorf("call %d: %d attempts through the adapter (%v), %d through the SDK's quota (%v)", i, n[0], errs[0], n[1], errs[1])
				}
				if got, want := tb.Available(), float64(theirs.Remaining()); got != want {
					t.Fatalf("call %d, whose context ended during its attempt: the budget holds %v, the SDK's quota %v (nothing charged)", i, got, want)
				}
				if !errors.Is(errs[0], tt.want) {
					t.Errorf("call %d: error %v; want one that wraps %v", i, errs[0], tt.want)
				}
			}
			if s := tb.Stats(); s.Granted+s.Denied != 0 {
				t.Errorf("the budget was asked for %d retries on a done context; want none", s.Granted+s.Denied)
			}
		})
	}
	// GetToken itself, outside the SDK's loop.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &spy{left: 1}
	release, err := awsbudget.New(s).GetToken(ctx, 5)
	if release != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("GetToken on a cancelled context = (%p, %v); want no token and an error wrapping context.Canceled", release, err)
	}
	var c interface{ CanceledError() bool }
	if !errors.As(err, &c) || !c.CanceledError() {
		t.Errorf("GetToken's error %v has no CanceledError() true, as the SDK's quota's has", err)
	}
	if len(s.log) != 0 {
		t.Errorf("the budget was told %v; want nothing", s.log)
	}
}

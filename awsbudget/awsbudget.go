package awsbudget

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/middleware"

	"github.com/retrybudget/retrybudget/budget"
)

// ErrInFlight is returned for a budget.InFlightBudget, which the SDK
// cannot serve: it never reports the end of a failed attempt or of a call,
// so every retry would stay in flight for ever. It wraps
// errors.ErrUnsupported.
var ErrInFlight = fmt.Errorf("awsbudget: an in-flight budget needs the ends of attempts and calls, which the SDK does not report: %w", errors.ErrUnsupported)

// ErrNoBudget is returned by a RateLimiter whose Budget is nil.
var ErrNoBudget = errors.New("awsbudget: RateLimiter has no Budget")

// A RateLimiter is the SDK's retry.RateLimiter over a budget.Budget: set it
// as retry.StandardOptions.RateLimiter. A ContextBudget is called with the
// retry's context.
//
// A denied retry returns an error that wraps both budget.ErrDenied and a
// ratelimit.QuotaExceededError, as the SDK's own quota does, so code that
// tests for either keeps working; the SDK adds it to the attempt's error.
// A ContextBudget that cannot answer and grants nothing returns an error
// wrapping budget.ErrBudgetUnavailable and the budget's error.
//
// The zero value has no budget and refuses every token; use [New].
// RateLimiter is safe for concurrent use by multiple goroutines when its
// Budget is, and its fields are not changed after first use.
type RateLimiter struct {
	// Budget is charged for every retry of every client that shares the
	// RateLimiter.
	Budget budget.Budget
	// ThrottlingRetryCost is the cost the SDK asks for a throttled retry:
	// retry.StandardOptions.ThrottlingRetryCost. Zero means its default,
	// retry.DefaultThrottlingRetryCost (5). Every other cost is a
	// transient retry. With RetryCost set equal to it, the SDK's two kinds
	// cannot be told apart, and every retry is Throttled.
	ThrottlingRetryCost uint
}

var _ retry.RateLimiter = (*RateLimiter)(nil)

// New returns a RateLimiter over b with the SDK's default costs.
func New(b budget.Budget) *RateLimiter { return &RateLimiter{Budget: b} }

// kind returns the kind of retry the SDK asks for at cost.
func (l *RateLimiter) kind(cost uint) budget.Kind {
	throttle := l.ThrottlingRetryCost
	if throttle == 0 {
		throttle = retry.DefaultThrottlingRetryCost
	}
	if cost == throttle {
		return budget.Throttled
	}
	return budget.Transient
}

func (l *RateLimiter) check() error {
	switch l.Budget.(type) {
	case nil:
		return ErrNoBudget
	case budget.InFlightBudget:
		return ErrInFlight
	}
	return nil
}

// GetToken asks the budget for a retry of the kind cost stands for. On a
// grant it returns the function the SDK calls when the retry succeeds,
// which tells the budget of that success.
//
// On a context that is already done it asks nothing and charges nothing,
// as the SDK's own quota (ratelimit.TokenRateLimit) does: the SDK asks for
// a token after an attempt whose context ended while it ran, and no retry
// can follow on that context. The error then wraps ctx.Err() and has a
// CanceledError() method that returns true, as the quota's has.
func (l *RateLimiter) GetToken(ctx context.Context, cost uint) (func() error, error) {
	if l == nil {
		return nil, ErrNoBudget
	}
	if err := l.check(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, canceledError{err}
	}
	k := l.kind(cost)
	var granted bool
	var berr error
	if cb, ok := l.Budget.(budget.ContextBudget); ok {
		granted, berr = cb.RetryContext(ctx, k)
	} else {
		granted = l.Budget.Retry(k)
	}
	if !granted {
		if berr != nil {
			return nil, fmt.Errorf("%w: %w", budget.ErrBudgetUnavailable, berr)
		}
		return nil, &deniedError{kind: k, quota: ratelimit.QuotaExceededError{Available: l.available(), Requested: cost}}
	}
	b := l.Budget
	return func() error {
		if cb, ok := b.(budget.ContextBudget); ok {
			return cb.SuccessContext(context.WithoutCancel(ctx), k)
		}
		b.Success(k)
		return nil
	}, nil
}

// AddTokens tells the budget that a first attempt succeeded; the SDK calls
// it with NoRetryIncrement, whatever that is.
func (l *RateLimiter) AddTokens(uint) error {
	if l == nil {
		return ErrNoBudget
	}
	if err := l.check(); err != nil {
		return err
	}
	if cb, ok := l.Budget.(budget.ContextBudget); ok {
		return cb.SuccessContext(context.Background(), budget.FirstAttempt)
	}
	l.Budget.Success(budget.FirstAttempt)
	return nil
}

// available is the budget's balance in whole tokens, for the error, or 0.
func (l *RateLimiter) available() uint {
	if b, ok := l.Budget.(budget.Balancer); ok {
		if v := b.Available(); v > 0 && v < math.MaxUint32 {
			return uint(v)
		}
	}
	return 0
}

// canceledError is GetToken's refusal on a done context; the SDK's quota
// returns one of the same shape.
type canceledError struct{ err error }

func (e canceledError) Error() string {
	return "awsbudget: no retry token on a done context: " + e.err.Error()
}
func (e canceledError) Unwrap() error       { return e.err }
func (e canceledError) CanceledError() bool { return true }

// deniedError is a denied retry: budget.ErrDenied and the SDK's own
// quota error.
type deniedError struct {
	kind  budget.Kind
	quota ratelimit.QuotaExceededError
}

func (e *deniedError) Error() string {
	return fmt.Sprintf("awsbudget: %s retry denied by the budget (%v)", e.kind, e.quota)
}

func (e *deniedError) Unwrap() []error { return []error{budget.ErrDenied, e.quota} }

// CountRequests returns an option for the SDK's APIOptions (aws.Config or a
// client's Options) that tells b of every operation's first attempt, once
// per operation, before the SDK's retry loop: what a budget that counts
// requests, such as budget.Ratio, needs and the RateLimiter cannot see. A
// ContextBudget is called with the operation's context. A budget that
// counts no requests (a TokenBucket) does not need it.
//
//	cfg.APIOptions = append(cfg.APIOptions, awsbudget.CountRequests(ratio))
func CountRequests(b budget.Budget) func(*middleware.Stack) error {
	return func(s *middleware.Stack) error {
		if b == nil {
			return ErrNoBudget
		}
		if _, ok := b.(budget.InFlightBudget); ok {
			return ErrInFlight
		}
		return s.Initialize.Add(requests{b}, middleware.Before)
	}
}

// requests is the Initialize middleware of CountRequests.
type requests struct{ b budget.Budget }

func (requests) ID() string { return "RetryBudgetRequest" }

func (r requests) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
	middleware.InitializeOutput, middleware.Metadata, error) {
	if cb, ok := r.b.(budget.ContextBudget); ok {
		_ = cb.RequestContext(ctx) // the budget reports its own errors; the call goes ahead
	} else {
		r.b.Request()
	}
	return next.HandleInitialize(ctx, in)
}

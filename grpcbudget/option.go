package grpcbudget

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retrybudget/retrybudget/budget"
)

// An Option configures an interceptor.
type Option func(*config)

// WithCodes has the interceptor retry the status codes cs as retries of
// kind, budget.Transient or budget.Throttled. Any other kind, such as
// budget.FirstAttempt, has them not retried: WithCodes(budget.FirstAttempt,
// codes.ResourceExhausted) turns off the retry of RESOURCE_EXHAUSTED. For a
// code named more than once, the last option wins.
//
// Retrying CANCELLED or DEADLINE_EXCEEDED retries only what the server
// returned: a call whose own context has ended is never retried.
func WithCodes(kind budget.Kind, cs ...codes.Code) Option {
	return func(c *config) {
		for _, code := range cs {
			c.codes[code] = kind
		}
	}
}

// WithBudgetFor has the interceptor ask f for each call's budget, in place
// of the Retrier's Budget: for example one budget per destination, picked
// by cc.Target() or by method. A nil Budget keeps the Retrier's. An error
// from f ends the call at once, with that error as it is: return a status
// error to choose the call's code.
//
// f runs on the calling goroutine, before the call's first attempt, and
// must be safe for concurrent use.
//
// WithBudgetFor needs the interceptor's loop to be a *budget.Retrier (or
// nil), to hand it the budget. Any other [budget.Loop] keeps its budget
// itself: with one, every call fails at once, with code INTERNAL and an
// error that says so, rather than run without the budget f would pick.
func WithBudgetFor(f func(ctx context.Context, method string, cc *grpc.ClientConn) (budget.Budget, error)) Option {
	return func(c *config) { c.budgetFor = f }
}

// config is an interceptor's configuration, fixed when it is made.
type config struct {
	r         budget.Retrier // a copy of the caller's, with classify as its Classify
	loop      budget.Loop    // a loop of the caller's own, in place of r; else nil
	codes     map[codes.Code]budget.Kind
	budgetFor func(ctx context.Context, method string, cc *grpc.ClientConn) (budget.Budget, error)
	misuse    error // the error of every call, for a loop of the caller's own with budgetFor
}

// newConfig takes l: a copy of a *budget.Retrier (nil, or a nil
// *budget.Retrier, means the zero Retrier), or any other loop as it is;
// and applies opts.
func newConfig(l budget.Loop, opts []Option) *config {
	c := &config{codes: map[codes.Code]budget.Kind{
		codes.Unavailable:       budget.Transient,
		codes.ResourceExhausted: budget.Throttled,
	}}
	switch r := l.(type) {
	case nil:
	case *budget.Retrier:
		if r != nil {
			c.r = *r
		}
	default:
		c.loop = l
	}
	c.r.Classify = classify
	for _, o := range opts {
		o(c)
	}
	if c.loop != nil && c.budgetFor != nil {
		c.misuse = status.Errorf(codes.Internal, "grpcbudget: WithBudgetFor needs a *budget.Retrier, and the interceptor's loop is a %T: "+
			"give the loop its budget yourself", c.loop)
	}
	return c
}

// retrier returns the Retrier for one call: the configured one, or a copy
// with the budget WithBudgetFor picked.
func (c *config) retrier(ctx context.Context, method string, cc *grpc.ClientConn) (*budget.Retrier, error) {
	if c.budgetFor == nil {
		return &c.r, nil
	}
	b, err := c.budgetFor(ctx, method, cc)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return &c.r, nil
	}
	r := c.r
	r.Budget = b
	return &r, nil
}

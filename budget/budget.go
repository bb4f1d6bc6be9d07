package budget

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// A Budget is a retry allowance shared by every call to one dependency.
//
// A caller tells the budget when a first attempt starts ([Budget.Request]),
// asks it before every retry ([Budget.Retry]) and tells it when an attempt
// succeeds ([Budget.Success]). A retry that the budget denies is a real
// outcome: the caller returns the failure now instead of waiting for the
// budget to recover.
//
// Implementations must be safe for concurrent use by multiple goroutines,
// and every method must be linearizable: its effect must appear to happen at
// one instant between its call and its return.
type Budget interface {
	// Request records that a first attempt is starting.
	Request()

	// Retry asks whether a retry may follow a failure of the given kind
	// (Transient or Throttled). True means the retry is granted and already
	// charged to the budget. A kind that is not a retry kind is denied and
	// charges nothing.
	Retry(kind Kind) bool

	// Success records that an attempt succeeded. kind is FirstAttempt when
	// the first attempt succeeded, or the kind of the retry that succeeded.
	// A kind that is not a retry kind counts as FirstAttempt.
	Success(kind Kind)
}

// A ContextBudget is a Budget whose calls can fail or take time, such as
// one kept in another process (package redisbudget keeps one in Redis). Its
// Context methods do what the plain ones do, within ctx, and return the
// error of a call that failed; the plain methods remain, for callers that
// do not care why.
//
// [Retrier] calls the Context methods of a Budget that has them, with the
// call's context, and tells a failed budget apart from a denial
// ([ErrBudgetUnavailable], not [ErrDenied]).
type ContextBudget interface {
	Budget

	// RequestContext is Request. An error means the request may not have
	// been counted.
	RequestContext(ctx context.Context) error

	// RetryContext is Retry. An error means the budget could not answer
	// for certain; granted is then its best answer (false, failing closed,
	// or what a local fallback decided), and a granted retry is charged
	// wherever the answer came from.
	RetryContext(ctx context.Context, kind Kind) (granted bool, err error)

	// SuccessContext is Success. An error means the success may not have
	// been counted.
	SuccessContext(ctx context.Context, kind Kind) error
}

// An InFlightBudget is a Budget that counts work in flight rather than work
// done, as Envoy's retry_budget, Istio's RetryBudget and failsafe-go's budget
// do: it is told when each attempt and each call ends, and it grants a retry
// by how many retries and calls are in flight at that instant.
//
// A call of an in-flight budget has this structure, which [Retrier] keeps
// on every path, a panicking operation's included:
//
//   - Request starts the call and its first attempt.
//   - Each attempt that starts ends exactly once, whatever its outcome,
//     with AttemptEnd: the first attempt's with AttemptEnd(FirstAttempt), a
//     granted retry's with AttemptEnd of the retry's kind. A retry is
//     started by the Retry that grants it, so a granted retry whose attempt
//     never runs (the call was cancelled during the backoff) still ends.
//     A denied retry starts nothing and has no end.
//   - Success, if the attempt succeeded, comes before its AttemptEnd.
//   - A failed attempt ends before the Retry asked for after it: its
//     AttemptEnd, then Retry for the next attempt, so that a retry never
//     counts beside the attempt it replaces. [Retrier] keeps this order.
//   - CallEnd ends the call, after its last attempt's end.
//
// An implementation defines its answer to input that breaks the structure.
// The reference [InFlight] ignores an end with nothing in flight, so that
// its counts never go below zero, and its model (model.InFlight) says the
// same. Every method must be safe for concurrent use and linearizable, as a
// Budget's are.
type InFlightBudget interface {
	Budget

	// AttemptEnd records that an attempt of the given kind ended: the
	// first attempt (FirstAttempt) or a granted retry (its kind), whether
	// it succeeded, failed, was cancelled, panicked or never ran.
	AttemptEnd(kind Kind)

	// CallEnd records that a call ended: it will make no more attempts.
	CallEnd()
}

// A FailureCounter is a Budget that counts every retryable failure, not
// only those after which a retry is asked for, as gRPC's retry throttling
// (gRFC A6) does: there a failed attempt with a retryable status takes a
// token even when no retry may follow it. [Throttle] is one.
//
// A caller that is about to ask [Budget.Retry] has the failure counted by
// that call. A caller that ends the call after a retryable failure without
// asking tells a FailureCounter with Failed instead, once for that failure:
//
//   - the call has used its attempts (MaxAttempts);
//   - no time is left for the next wait (the context's deadline, or the
//     call's own limit);
//   - the server forbade the retry (gRPC's "do not retry" pushback), which
//     a [Classifier] says by returning a retry kind with retryable false.
//
// A failure that is not retryable, or that came after the call's context
// ended, is not a failure of the dependency, and is told to no budget. So
// each retryable failure reaches the budget exactly once, through Retry or
// through Failed. [Retrier] keeps this; a Budget that is not a
// FailureCounter is never told, so a budget written before this interface
// keeps its meaning. Failed must be safe for concurrent use and
// linearizable, as a Budget's methods are.
type FailureCounter interface {
	Budget

	// Failed records a retryable failure of the given kind (Transient or
	// Throttled) after which the call asks no retry. A kind that is not a
	// retry kind records nothing.
	Failed(kind Kind)
}

// Kind classifies an attempt by the failure that caused it: a first attempt
// (no failure yet), or a retry after a transient or a throttling failure.
type Kind uint8

const (
	// FirstAttempt is the zero Kind: an attempt that is not a retry.
	FirstAttempt Kind = iota
	// Transient is a retry after a transient failure: a timeout, a reset
	// connection, a 5xx response.
	Transient
	// Throttled is a retry after the dependency asked the caller to slow
	// down: HTTP 429, gRPC RESOURCE_EXHAUSTED, an AWS throttling error.
	Throttled
)

// IsRetry reports whether k is a retry kind (Transient or Throttled).
func (k Kind) IsRetry() bool { return k == Transient || k == Throttled }

// String returns "first", "transient", "throttled" or "Kind(N)".
func (k Kind) String() string {
	switch k {
	case FirstAttempt:
		return "first"
	case Transient:
		return "transient"
	case Throttled:
		return "throttled"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// ErrInvalidConfig is wrapped by every error a constructor returns for a
// configuration it cannot honour. Test for it with [errors.Is]; the error's
// text names the field, the value given and the range allowed.
var ErrInvalidConfig = errors.New("invalid config")

// A ConfigError describes one configuration field that a constructor rejected.
// It matches [ErrInvalidConfig] under [errors.Is].
type ConfigError struct {
	Field string // the field, as Type.Field, for example "RatioConfig.Ratio"
	Value string // the value given, formatted
	Want  string // the values allowed, for example "(0, 1]"
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("budget: %s must be %s, got %s", e.Field, e.Want, e.Value)
}

// Is reports whether target is [ErrInvalidConfig].
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

func configError(field string, value any, want string) error {
	return &ConfigError{Field: field, Value: fmt.Sprint(value), Want: want}
}

package otelbudget

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/retrybudget/retrybudget/budget"
)

// An Option configures the hooks that [Hooks] returns.
type Option func(*config)

// WithAttributes adds attrs to every measurement the hooks make, for
// example BudgetKey.String("payments") or a service name. An attribute
// with the key of one the hooks set themselves (KindKey, GrantedKey,
// ReasonKey) is overridden by theirs.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, attrs...) }
}

type config struct {
	attrs []attribute.KeyValue
}

// delayBuckets are the retry.delay histogram's bucket boundaries, in
// seconds: from 5ms up to the Retrier's default MaxDelay of 20s.
var delayBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20}

// numKinds is the number of valid budget.Kind values.
const numKinds = int(budget.Throttled) + 1

// Reasons a call gives up for, in the order of ReasonKey's values.
type reason uint8

const (
	reasonDenied reason = iota
	reasonAttempts
	reasonNoTime
	reasonBudgetUnavailable
	reasonCanceled
	reasonDeadline
	reasonNotRetryable
	numReasons
)

var reasonNames = [numReasons]string{"denied", "attempts", "no_time", "budget_unavailable", "canceled", "deadline", "not_retryable"}

// sentinels are the errors that tell a give-up's reason, by reason.
var sentinels = [reasonNotRetryable]error{
	budget.ErrDenied, budget.ErrAttempts, budget.ErrNoTime, budget.ErrBudgetUnavailable,
	context.Canceled, context.DeadlineExceeded,
}

// hooks holds the instruments and, for each attribute combination, the
// measurement option made once, so that a hook call allocates none.
type hooks struct {
	attempts, retries, giveups metric.Int64Counter
	delay                      metric.Float64Histogram
	extra                      []attribute.KeyValue

	attemptOpts [numKinds][]metric.AddOption
	retryOpts   [numKinds][2][]metric.AddOption // by kind, then granted
	delayOpts   [numKinds][]metric.RecordOption
	giveupOpts  [numReasons][]metric.AddOption
}

// Hooks returns Retrier hooks that record a Retrier's calls with
// instruments made by meter:
//
//   - retrybudget.attempts, a counter of the attempts started, by
//     retrybudget.kind (first, transient, throttled);
//   - retrybudget.retries, a counter of the budget's answers to the
//     retries asked for, by retrybudget.kind and retrybudget.granted;
//   - retrybudget.retry.delay, a histogram of the waits before granted
//     retries, in seconds, by retrybudget.kind;
//   - retrybudget.giveups, a counter of the calls that ended without a
//     success, by retrybudget.reason.
//
// The reason is the [budget.Retrier] error's: "denied" ([budget.ErrDenied]),
// "attempts" ([budget.ErrAttempts]), "no_time" ([budget.ErrNoTime]),
// "budget_unavailable" ([budget.ErrBudgetUnavailable]), "canceled" or
// "deadline" when the call's context ended, and "not_retryable" for an
// error the Classifier does not retry, whatever that error wraps. When an
// error wraps more than one of these, as a nested Retrier's does, the
// outermost counts.
//
// The attribute sets are made once, here, so that a hook call allocates
// nothing; a call that succeeds at once costs one counter increment. The
// error is the meter's, should it fail to make an instrument.
func Hooks(meter metric.Meter, opts ...Option) (budget.Hooks, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	h := &hooks{extra: c.attrs}
	var err error
	if h.attempts, err = meter.Int64Counter("retrybudget.attempts",
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts started by a Retrier, the first of each call included.")); err != nil {
		return budget.Hooks{}, fmt.Errorf("otelbudget: %w", err)
	}
	if h.retries, err = meter.Int64Counter("retrybudget.retries",
		metric.WithUnit("{retry}"),
		metric.WithDescription("Retries a Retrier asked its budget for, granted or not.")); err != nil {
		return budget.Hooks{}, fmt.Errorf("otelbudget: %w", err)
	}
	if h.delay, err = meter.Float64Histogram("retrybudget.retry.delay",
		metric.WithUnit("s"),
		metric.WithDescription("Wait before each granted retry."),
		metric.WithExplicitBucketBoundaries(delayBuckets...)); err != nil {
		return budget.Hooks{}, fmt.Errorf("otelbudget: %w", err)
	}
	if h.giveups, err = meter.Int64Counter("retrybudget.giveups",
		metric.WithUnit("{call}"),
		metric.WithDescription("Calls a Retrier ended without a success.")); err != nil {
		return budget.Hooks{}, fmt.Errorf("otelbudget: %w", err)
	}
	for k := range numKinds {
		kind := KindKey.String(budget.Kind(k).String())
		h.attemptOpts[k] = []metric.AddOption{h.set(kind)}
		h.delayOpts[k] = []metric.RecordOption{h.set(kind)}
		for g := range 2 {
			h.retryOpts[k][g] = []metric.AddOption{h.set(kind, GrantedKey.Bool(g == 1))}
		}
	}
	for r := range numReasons {
		h.giveupOpts[r] = []metric.AddOption{h.set(ReasonKey.String(reasonNames[r]))}
	}
	return budget.Hooks{OnAttempt: h.onAttempt, OnRetry: h.onRetry, OnGiveUp: h.onGiveUp}, nil
}

// set returns the option of the attribute set made of the extra
// attributes and attrs, which win over extra ones of the same key.
func (h *hooks) set(attrs ...attribute.KeyValue) metric.MeasurementOption {
	all := make([]attribute.KeyValue, 0, len(h.extra)+len(attrs))
	all = append(append(all, h.extra...), attrs...)
	return metric.WithAttributeSet(attribute.NewSet(all...)) // NewSet keeps the last value of a key
}

func (h *hooks) onAttempt(ctx context.Context, a budget.Attempt) {
	if int(a.Kind) < numKinds {
		h.attempts.Add(ctx, 1, h.attemptOpts[a.Kind]...)
		return
	}
	h.attempts.Add(ctx, 1, h.set(KindKey.String(a.Kind.String())))
}

func (h *hooks) onRetry(ctx context.Context, e budget.RetryEvent) {
	g := 0
	if e.Granted {
		g = 1
	}
	if int(e.Kind) < numKinds {
		h.retries.Add(ctx, 1, h.retryOpts[e.Kind][g]...)
		if e.Granted {
			h.delay.Record(ctx, e.Delay.Seconds(), h.delayOpts[e.Kind]...)
		}
		return
	}
	kind := KindKey.String(e.Kind.String())
	h.retries.Add(ctx, 1, h.set(kind, GrantedKey.Bool(e.Granted)))
	if e.Granted {
		h.delay.Record(ctx, e.Delay.Seconds(), h.set(kind))
	}
}

func (h *hooks) onGiveUp(ctx context.Context, e budget.GiveUpEvent) {
	h.giveups.Add(ctx, 1, h.giveupOpts[reasonOf(ctx, e)]...)
}

// reasonOf tells why the call of e gave up. A call whose last failure was
// of a retry kind gave up for the sentinel its error wraps outermost: for
// a nested Retrier's error, the outer Retrier's reason, not the inner one.
// A call with no retry kind either failed with an error that is not
// retryable, which may wrap anything, or saw its context end after the
// attempt: ctx, the call's, tells which.
func reasonOf(ctx context.Context, e budget.GiveUpEvent) reason {
	if !e.Kind.IsRetry() {
		if cerr := ctx.Err(); cerr != nil && errors.Is(e.Err, cerr) {
			if cerr == context.Canceled {
				return reasonCanceled
			}
			return reasonDeadline
		}
		return reasonNotRetryable
	}
	if r, ok := outermost(e.Err); ok {
		return r
	}
	return reasonNotRetryable
}

// outermost returns the reason of the first sentinel in err's tree, in
// the order errors.Is visits it: depth first, a wrapper before what it
// wraps, a joined error's parts left to right.
func outermost(err error) (reason, bool) {
	if err == nil {
		return 0, false
	}
	is, _ := err.(interface{ Is(error) bool })
	for r, s := range sentinels {
		if err == s || (is != nil && is.Is(s)) {
			return reason(r), true
		}
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return outermost(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if r, ok := outermost(e); ok {
				return r, true
			}
		}
	}
	return 0, false
}

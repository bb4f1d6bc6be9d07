package otelbudget

import (
	"context"
	"fmt"
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/retrybudget/retrybudget/budget"
)

// Observe registers with meter a callback that reports b's state at each
// collection, with the attribute retrybudget.budget = name:
//
//   - retrybudget.budget.retries, an observable counter of b's answers
//     to Retry since it was built (its [budget.Stats]), by
//     retrybudget.granted, when b is a [budget.StatsBudget];
//   - retrybudget.budget.available, an observable gauge of b's balance,
//     when b is a [budget.Balancer] or a [budget.ContextBalancer].
//
// A ContextBalancer, such as a budget of package redisbudget, is read with
// the collection's context and preferred over Available when b has both.
// A read that fails reports no balance for that collection, rather than a
// value that was not read, and no error either: an error returned from the
// callback would fail the whole collection, and the budget reports its own
// failures (redisbudget's Config.OnError and Errors). A missing point
// shows as a gap in the gauge.
//
// A budget that has neither Stats nor a balance is an error, and so is a
// meter that cannot make the instruments. Use one name per budget and
// meter. Stop the reports with the returned Registration's Unregister.
func Observe(meter metric.Meter, name string, b budget.Budget) (metric.Registration, error) {
	o := &observer{}
	o.stats, _ = b.(budget.StatsBudget)
	if cb, ok := b.(budget.ContextBalancer); ok {
		o.balance = cb.AvailableContext
	} else if lb, ok := b.(budget.Balancer); ok {
		o.balance = func(context.Context) (float64, error) { return lb.Available(), nil }
	}
	if o.stats == nil && o.balance == nil {
		return nil, fmt.Errorf("otelbudget: budget %q (%T) has no Stats, Available or AvailableContext method: nothing to observe", name, b)
	}
	var insts []metric.Observable
	var err error
	if o.stats != nil {
		if o.retries, err = meter.Int64ObservableCounter("retrybudget.budget.retries",
			metric.WithUnit("{retry}"),
			metric.WithDescription("Retries a budget answered since it was built, granted or denied.")); err != nil {
			return nil, fmt.Errorf("otelbudget: %w", err)
		}
		insts = append(insts, o.retries)
		for g := range 2 {
			o.retryOpts[g] = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(BudgetKey.String(name), GrantedKey.Bool(g == 1)))}
		}
	}
	if o.balance != nil {
		if o.available, err = meter.Float64ObservableGauge("retrybudget.budget.available",
			metric.WithDescription("What a budget holds: tokens, or retries it would still grant.")); err != nil {
			return nil, fmt.Errorf("otelbudget: %w", err)
		}
		insts = append(insts, o.available)
		o.availOpts = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(BudgetKey.String(name)))}
	}
	reg, err := meter.RegisterCallback(o.observe, insts...)
	if err != nil {
		return nil, fmt.Errorf("otelbudget: %w", err)
	}
	return reg, nil
}

// observer reports one budget.
type observer struct {
	stats   budget.StatsBudget                     // nil without Stats
	balance func(context.Context) (float64, error) // nil without a balance

	retries   metric.Int64ObservableCounter
	available metric.Float64ObservableGauge
	retryOpts [2][]metric.ObserveOption // denied, granted
	availOpts []metric.ObserveOption
}

func (o *observer) observe(ctx context.Context, obs metric.Observer) error {
	if o.stats != nil {
		s := o.stats.Stats()
		obs.ObserveInt64(o.retries, clamp(s.Denied), o.retryOpts[0]...)
		obs.ObserveInt64(o.retries, clamp(s.Granted), o.retryOpts[1]...)
	}
	if o.balance != nil {
		if v, err := o.balance(ctx); err == nil {
			obs.ObserveFloat64(o.available, v, o.availOpts...)
		}
	}
	return nil
}

// clamp converts a count to int64, which it outgrows only after 2^63.
func clamp(n uint64) int64 { return int64(min(n, math.MaxInt64)) }

package otelbudget

import "go.opentelemetry.io/otel/attribute"

// ScopeName is the instrumentation scope to name the meter by:
// provider.Meter(otelbudget.ScopeName).
const ScopeName = "github.com/retrybudget/retrybudget/otelbudget"

// The attribute keys of the measurements.
const (
	// KindKey is the kind of an attempt or a retry: "first", "transient"
	// or "throttled" ([budget.Kind.String]).
	KindKey = attribute.Key("retrybudget.kind")
	// GrantedKey tells a granted retry (true) from a denied one (false).
	GrantedKey = attribute.Key("retrybudget.granted")
	// ReasonKey is why a call gave up: "denied", "attempts", "no_time",
	// "budget_unavailable", "canceled", "deadline" or "not_retryable".
	ReasonKey = attribute.Key("retrybudget.reason")
	// BudgetKey names a budget: [Observe] sets it to its name argument.
	// Pass the same with [WithAttributes] to [Hooks] to join the two
	// sets of metrics.
	BudgetKey = attribute.Key("retrybudget.budget")
)

// Package otelbudget exports retry budgets and the Retriers that use them as
// OpenTelemetry metrics.
//
// It is a module of its own, so that a program that imports package budget
// never downloads OpenTelemetry. It uses only the OpenTelemetry metric API:
// the program chooses the SDK and the exporter.
//
// The pieces fit together like this:
//
//   - [Hooks] returns [budget.Hooks] for a [budget.Retrier]: counters of the
//     attempts, of the retries asked for (granted or denied) and of the
//     calls given up (by reason), and a histogram of the waits before
//     retries. They count what one process's Retrier did.
//   - [Observe] reports a budget's own state at each collection: its
//     answers ([budget.Stats]) and its balance ([budget.Balancer], or
//     [budget.ContextBalancer] for a budget kept elsewhere, such as one of
//     package redisbudget).
//   - [BudgetKey] and the other keys name the attributes. Pass
//     BudgetKey.String(name) to Hooks with [WithAttributes] to label a
//     Retrier's metrics as Observe labels its budget's.
//
// Typical use, for one budget and the Retrier that shares it:
//
//	meter := provider.Meter(otelbudget.ScopeName)
//	tb, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
//	...
//	hooks, err := otelbudget.Hooks(meter, otelbudget.WithAttributes(otelbudget.BudgetKey.String("payments")))
//	...
//	reg, err := otelbudget.Observe(meter, "payments", tb)
//	...
//	defer reg.Unregister()
//	r := &budget.Retrier{Budget: tb, Hooks: hooks}
//
// The metrics are:
//
//	retrybudget.attempts           counter    {attempt}  retrybudget.kind
//	retrybudget.retries            counter    {retry}    retrybudget.kind, retrybudget.granted
//	retrybudget.retry.delay        histogram  s          retrybudget.kind (granted retries only)
//	retrybudget.giveups            counter    {call}     retrybudget.reason
//	retrybudget.budget.retries     observable counter    retrybudget.budget, retrybudget.granted
//	retrybudget.budget.available   observable gauge      retrybudget.budget
//
// The hooks' counters and Observe's counter count the same answers from two
// sides: the hooks count what a Retrier asked of its budget, Observe what
// the budget answered to everyone that asked it (other Retriers included),
// and since it was built, not since the hooks were made.
package otelbudget

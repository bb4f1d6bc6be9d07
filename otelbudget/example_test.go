package otelbudget_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/otelbudget"
)

// A Retrier with the hooks, and its budget observed, both labelled
// "payments". The call fails twice and then succeeds.
func Example() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	meter := provider.Meter(otelbudget.ScopeName)

	tb, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	if err != nil {
		log.Fatal(err)
	}
	hooks, err := otelbudget.Hooks(meter, otelbudget.WithAttributes(otelbudget.BudgetKey.String("payments")))
	if err != nil {
		log.Fatal(err)
	}
	reg, err := otelbudget.Observe(meter, "payments", tb)
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Unregister()

	r := &budget.Retrier{Budget: tb, Hooks: hooks, BaseDelay: time.Millisecond}
	err = r.Do(context.Background(), func(_ context.Context, a budget.Attempt) error {
		if a.N < 3 {
			return errors.New("connection reset")
		}
		return nil
	})
	fmt.Println("Do:", err)
	printMetrics(reader)
	// Output:
	// Do: <nil>
	// retrybudget.attempts{retrybudget.budget=payments,retrybudget.kind=first} 1
	// retrybudget.attempts{retrybudget.budget=payments,retrybudget.kind=transient} 2
	// retrybudget.budget.available{retrybudget.budget=payments} 486
	// retrybudget.budget.retries{retrybudget.budget=payments,retrybudget.granted=false} 0
	// retrybudget.budget.retries{retrybudget.budget=payments,retrybudget.granted=true} 2
	// retrybudget.retries{retrybudget.budget=payments,retrybudget.granted=true,retrybudget.kind=transient} 2
	// retrybudget.retry.delay{retrybudget.budget=payments,retrybudget.kind=transient} count 2
}

// A budget that holds one retry: the first call's retry is granted, and
// fails too, so the call runs out of attempts; the second call's retry is
// denied.
func ExampleHooks() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())

	hooks, err := otelbudget.Hooks(provider.Meter(otelbudget.ScopeName))
	if err != nil {
		log.Fatal(err)
	}
	tb, err := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 1, TransientCost: 1, ThrottledCost: 1})
	if err != nil {
		log.Fatal(err)
	}
	r := &budget.Retrier{Budget: tb, Hooks: hooks, MaxAttempts: 2, BaseDelay: time.Millisecond}
	fail := func(context.Context, budget.Attempt) error { return errors.New("connection reset") }
	for range 2 {
		fmt.Println("Do:", r.Do(context.Background(), fail))
	}
	printMetrics(reader)
	// Output:
	// Do: budget: out of attempts after 2 attempts: connection reset
	// Do: budget: retry denied after 1 attempts: connection reset
	// retrybudget.attempts{retrybudget.kind=first} 2
	// retrybudget.attempts{retrybudget.kind=transient} 1
	// retrybudget.giveups{retrybudget.reason=attempts} 1
	// retrybudget.giveups{retrybudget.reason=denied} 1
	// retrybudget.retries{retrybudget.granted=false,retrybudget.kind=transient} 1
	// retrybudget.retries{retrybudget.granted=true,retrybudget.kind=transient} 1
	// retrybudget.retry.delay{retrybudget.kind=transient} count 1
}

// A budget's counts and balance, read at each collection until the
// registration ends.
func ExampleObserve() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())

	tb, err := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 10, TransientCost: 4, ThrottledCost: 1})
	if err != nil {
		log.Fatal(err)
	}
	reg, err := otelbudget.Observe(provider.Meter(otelbudget.ScopeName), "payments", tb)
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		tb.Retry(budget.Transient) // granted, granted, denied
	}
	printMetrics(reader)

	reg.Unregister()
	fmt.Println("after Unregister:")
	printMetrics(reader)
	// Output:
	// retrybudget.budget.available{retrybudget.budget=payments} 2
	// retrybudget.budget.retries{retrybudget.budget=payments,retrybudget.granted=false} 1
	// retrybudget.budget.retries{retrybudget.budget=payments,retrybudget.granted=true} 2
	// after Unregister:
}

// printMetrics collects reader's metrics and prints one line per data
// point, in sorted order: for a histogram, its count.
func printMetrics(reader *sdkmetric.ManualReader) {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	var lines []string
	line := func(name string, attrs attribute.Set, value any) {
		lines = append(lines, fmt.Sprintf("%s{%s} %v", name, attrs.Encoded(attribute.DefaultEncoder()), value))
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					line(m.Name, p.Attributes, p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					line(m.Name, p.Attributes, p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					line(m.Name, p.Attributes, fmt.Sprint("count ", p.Count))
				}
			}
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}

package otelbudget_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/otelbudget"
)

var errBoom = errors.New("boom")

// newMeter returns a meter of a fresh SDK provider, and the reader that
// collects what it measures.
func newMeter(t testing.TB) (metric.Meter, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { provider.Shutdown(context.Background()) })
	return provider.Meter(otelbudget.ScopeName), reader
}

// points collects reader's data points, keyed "name{k=v,...}" with the
// attributes sorted by key; a histogram point becomes "... count" and
// "... sum".
func points(t testing.TB, reader *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	return pointsContext(t, context.Background(), reader)
}

func pointsContext(t testing.TB, ctx context.Context, reader *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	got := map[string]float64{}
	key := func(name string, attrs attribute.Set) string {
		return name + "{" + attrs.Encoded(attribute.DefaultEncoder()) + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelbudget.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, otelbudget.ScopeName)
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !d.IsMonotonic {
					t.Errorf("%s is not monotonic", m.Name)
				}
				for _, p := range d.DataPoints {
					got[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					got[key(m.Name, p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[key(m.Name, p.Attributes)+" count"] = float64(p.Count)
					got[key(m.Name, p.Attributes)+" sum"] = p.Sum
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return got
}

// checkPoints compares got with want, point by point.
func checkPoints(t testing.TB, got, want map[string]float64) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			t.Errorf("no point %s, want %v", k, want[k])
		} else if g != want[k] {
			t.Errorf("point %s = %v, want %v", k, g, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected point %s = %v", k, got[k])
		}
	}
}

// newHooks returns the hooks for meter, failing the test on an error.
func newHooks(t testing.TB, meter metric.Meter, opts ...otelbudget.Option) budget.Hooks {
	t.Helper()
	h, err := otelbudget.Hooks(meter, opts...)
	if err != nil {
		t.Fatalf("Hooks: %v", err)
	}
	return h
}

// failing returns an operation that fails with errs, one per attempt, and
// then succeeds.
func failing(errs ...error) func(context.Context, budget.Attempt) error {
	return func(_ context.Context, a budget.Attempt) error {
		if a.N <= len(errs) {
			return errs[a.N-1]
		}
		return nil
	}
}

// every returns a Jitter that waits d before every retry.
func every(d time.Duration) func(time.Duration) time.Duration {
	return func(time.Duration) time.Duration { return d }
}

func TestHooksRetriedThenSucceeds(t *testing.T) {
	meter, reader := newMeter(t)
	tb, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := budget.Retrier{Budget: tb, Hooks: newHooks(t, meter), Jitter: every(time.Millisecond)}
	if err := r.Do(context.Background(), failing(errBoom, errBoom)); err != nil {
		t.Fatalf("Do = %v, want nil", err)
	}
	checkPoints(t, points(t, reader), map[string]float64{
		"retrybudget.attempts{retrybudget.kind=first}":                             1,
		"retrybudget.attempts{retrybudget.kind=transient}":                         2,
		"retrybudget.retries{retrybudget.granted=true,retrybudget.kind=transient}": 2,
		"retrybudget.retry.delay{retrybudget.kind=transient} count":                2,
		"retrybudget.retry.delay{retrybudget.kind=transient} sum":                  0.002,
	})
}

func TestHooksKinds(t *testing.T) {
	meter, reader := newMeter(t)
	r := budget.Retrier{Hooks: newHooks(t, meter), Jitter: every(4 * time.Millisecond)}
	// The backoff (4ms), then a server delay, which replaces it (1ms).
	if err := r.Do(context.Background(), failing(budget.MarkThrottled(errBoom, 0), budget.MarkThrottled(errBoom, time.Millisecond))); err != nil {
		t.Fatalf("Do = %v, want nil", err)
	}
	checkPoints(t, points(t, reader), map[string]float64{
		"retrybudget.attempts{retrybudget.kind=first}":                             1,
		"retrybudget.attempts{retrybudget.kind=throttled}":                         2,
		"retrybudget.retries{retrybudget.granted=true,retrybudget.kind=throttled}": 2,
		"retrybudget.retry.delay{retrybudget.kind=throttled} count":                2,
		"retrybudget.retry.delay{retrybudget.kind=throttled} sum":                  0.005,
	})
}

// deny is a budget that denies every retry.
type deny struct{}

func (deny) Request()               {}
func (deny) Retry(budget.Kind) bool { return false }
func (deny) Success(budget.Kind)    {}

func TestHooksDenied(t *testing.T) {
	meter, reader := newMeter(t)
	r := budget.Retrier{Budget: deny{}, Hooks: newHooks(t, meter), Jitter: every(time.Millisecond)}
	if err := r.Do(context.Background(), failing(errBoom)); !errors.Is(err, budget.ErrDenied) {
		t.Fatalf("Do = %v, want ErrDenied", err)
	}
	checkPoints(t, points(t, reader), map[string]float64{
		"retrybudget.attempts{retrybudget.kind=first}":                              1,
		"retrybudget.retries{retrybudget.granted=false,retrybudget.kind=transient}": 1,
		"retrybudget.giveups{retrybudget.reason=denied}":                            1,
	})
}

// The extra attributes are on every point; the hooks' own keys win over
// them where the hooks set those keys.
func TestHooksWithAttributes(t *testing.T) {
	meter, reader := newMeter(t)
	hooks := newHooks(t, meter, otelbudget.WithAttributes(otelbudget.BudgetKey.String("payments")),
		otelbudget.WithAttributes(attribute.String("service", "checkout"), otelbudget.KindKey.String("overridden")))
	r := budget.Retrier{Budget: deny{}, Hooks: hooks, Jitter: every(time.Millisecond)}
	r.Do(context.Background(), failing(errBoom))
	const extra = "retrybudget.budget=payments,"
	checkPoints(t, points(t, reader), map[string]float64{
		"retrybudget.attempts{" + extra + "retrybudget.kind=first,service=checkout}":                               1,
		"retrybudget.retries{" + extra + "retrybudget.granted=false,retrybudget.kind=transient,service=checkout}":  1,
		"retrybudget.giveups{" + extra + "retrybudget.kind=overridden,retrybudget.reason=denied,service=checkout}": 1,
	})
}

// unavailable is a ContextBudget that cannot answer.
type unavailable struct{ deny }

var errDown = errors.New("store down")

func (unavailable) RequestContext(context.Context) error { return nil }
func (unavailable) RetryContext(context.Context, budget.Kind) (bool, error) {
	return false, errDown
}
func (unavailable) SuccessContext(context.Context, budget.Kind) error { return nil }

// Each way a call can end without success counts under its reason, and
// only there.
func TestHooksGiveUpReasons(t *testing.T) {
	var cancel context.CancelFunc // the current case's
	tests := []struct {
		name    string
		r       budget.Retrier
		timeout time.Duration // of the call's context, if positive
		op      func(context.Context, budget.Attempt) error
		want    string
	}{
		{"Denied", budget.Retrier{Budget: deny{}}, 0, failing(errBoom), "denied"},
		{"Attempts", budget.Retrier{MaxAttempts: 2}, 0, failing(errBoom, errBoom), "attempts"},
		{"NoTime", budget.Retrier{MaxElapsed: time.Millisecond, Jitter: every(time.Second)}, 0, failing(errBoom), "no_time"},
		{"BudgetUnavailable", budget.Retrier{Budget: unavailable{}}, 0, failing(errBoom), "budget_unavailable"},
		{"CanceledInAttempt", budget.Retrier{}, 0, func(context.Context, budget.Attempt) error {
			cancel()
			return errBoom
		}, "canceled"},
		{"CanceledInBackoff", budget.Retrier{Jitter: func(time.Duration) time.Duration {
			cancel()
			return time.Hour
		}}, 0, failing(errBoom), "canceled"},
		{"Deadline", budget.Retrier{}, time.Millisecond, func(ctx context.Context, _ budget.Attempt) error {
			<-ctx.Done()
			return errBoom
		}, "deadline"},
		{"NotRetryable", budget.Retrier{}, 0, failing(budget.MarkPermanent(errBoom)), "not_retryable"},
		// An error that is not retried is counted as such, whatever it wraps.
		{"NotRetryableWrapsDenied", budget.Retrier{}, 0, failing(budget.MarkPermanent(fmt.Errorf("inner: %w", budget.ErrDenied))), "not_retryable"},
		{"NotRetryableOwnDeadline", budget.Retrier{}, 0, failing(fmt.Errorf("attempt: %w", context.DeadlineExceeded)), "not_retryable"},
		// A nested Retrier's reason is the inner one's; the outer one's is
		// its own.
		{"NestedRetrier", budget.Retrier{MaxAttempts: 1}, 0, failing(fmt.Errorf("inner: %w", budget.ErrDenied)), "attempts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			meter, reader := newMeter(t)
			r := tt.r
			r.Hooks = newHooks(t, meter)
			if r.Jitter == nil {
				r.Jitter = every(0)
			}
			ctx, stop := context.WithCancel(context.Background())
			if tt.timeout > 0 {
				ctx, stop = context.WithTimeout(context.Background(), tt.timeout)
			}
			defer stop()
			cancel = stop
			if err := r.Do(ctx, tt.op); err == nil {
				t.Fatal("Do = nil, want an error")
			}
			got := points(t, reader)
			var giveups []string
			for k, v := range got {
				if strings.HasPrefix(k, "retrybudget.giveups{") {
					giveups = append(giveups, fmt.Sprintf("%s=%v", k, v))
				}
			}
			if want := []string{"retrybudget.giveups{retrybudget.reason=" + tt.want + "}=1"}; !slices.Equal(giveups, want) {
				t.Errorf("give-ups %v, want %v", giveups, want)
			}
		})
	}
}

// Kinds that are not valid still count, by their String.
func TestHooksUnknownKind(t *testing.T) {
	meter, reader := newMeter(t)
	h := newHooks(t, meter)
	ctx := context.Background()
	h.OnAttempt(ctx, budget.Attempt{N: 2, Kind: 7})
	h.OnRetry(ctx, budget.RetryEvent{Kind: 7, Granted: true, Delay: 2 * time.Second})
	h.OnGiveUp(ctx, budget.GiveUpEvent{Kind: 7, Err: errBoom})
	checkPoints(t, points(t, reader), map[string]float64{
		"retrybudget.attempts{retrybudget.kind=Kind(7)}":                         1,
		"retrybudget.retries{retrybudget.granted=true,retrybudget.kind=Kind(7)}": 1,
		"retrybudget.retry.delay{retrybudget.kind=Kind(7)} count":                1,
		"retrybudget.retry.delay{retrybudget.kind=Kind(7)} sum":                  2,
		"retrybudget.giveups{retrybudget.reason=not_retryable}":                  1,
	})
}

// A hook call with a valid kind allocates nothing of its own.
func TestHooksNoAllocs(t *testing.T) {
	meter, _ := newMeter(t)
	h := newHooks(t, meter)
	ctx := context.Background()
	a := budget.Attempt{N: 2, Kind: budget.Transient}
	retry := budget.RetryEvent{Attempt: a, Kind: budget.Throttled, Granted: true, Delay: time.Millisecond, Err: errBoom}
	giveUp := budget.GiveUpEvent{Attempts: 3, Kind: budget.Transient, Err: fmt.Errorf("%w: %w", budget.ErrAttempts, errBoom)}
	for _, tt := range []struct {
		name string
		f    func()
	}{
		{"OnAttempt", func() { h.OnAttempt(ctx, a) }},
		{"OnRetry", func() { h.OnRetry(ctx, retry) }},
		{"OnGiveUp", func() { h.OnGiveUp(ctx, giveUp) }},
	} {
		tt.f() // the SDK allocates a new attribute set's storage once
		if n := testing.AllocsPerRun(100, tt.f); n != 0 {
			t.Errorf("%s: AllocsPerRun = %v, want 0", tt.name, n)
		}
	}
}

package budget_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

func ExampleNewTokenBucket() {
	b, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	if err != nil {
		panic(err)
	}
	fmt.Println(b.Retry(budget.Transient), b.Available()) // 500 - 14
	fmt.Println(b.Retry(budget.Throttled), b.Available()) // - 5
	b.Success(budget.Transient)                           // a successful retry refunds its cost
	fmt.Println(b.Available())
	// Output:
	// true 486
	// true 481
	// 495
}

func ExampleNewTokenBucket_refill() {
	// The bucket of the article "Retry budgets by language": 40 tokens, 1 per retry, +0.1 per success, refilled
	// at 1 token per second. A ManualClock stands in for time.
	clock := new(budget.ManualClock)
	b, err := budget.NewTokenBucket(budget.TokenBucketConfig{
		Capacity: 40, TransientCost: 1, ThrottledCost: 1,
		SuccessBonus: 0.1, NoRefund: true, RefillPerSecond: 1, Clock: clock,
	})
	if err != nil {
		panic(err)
	}
	for range 50 { // drain it: 40 retries are granted, then none
		b.Retry(budget.Transient)
	}
	fmt.Println(b.Available())
	clock.Advance(2500 * time.Millisecond)
	fmt.Println(b.Available())
	// Output:
	// 0
	// 2.5
}

func ExampleNewRatio() {
	c := budget.DefaultRatioConfig() // 10% over 10 s, floor 3
	c.Clock = new(budget.ManualClock)
	b, err := budget.NewRatio(c)
	if err != nil {
		panic(err)
	}
	for range 50 {
		b.Request()
	}
	granted := 0
	for range 10 {
		if b.Retry(budget.Transient) {
			granted++
		}
	}
	fmt.Println(granted, "of 10 retries granted for 50 requests")
	// Output: 5 of 10 retries granted for 50 requests
}

// Finagle's default retry budget (com.twitter.finagle.service.RetryBudget's
// apply(): ttl 10 s, minRetriesPerSec 10, percentCanRetry 0.2) allows 20% of
// the requests of about the last ttl plus minRetriesPerSec × ttl in seconds:
// a Ratio over a 10 s Window with a Reserve of 100, checked against
// model.Ratio{PPM: 200_000, Window: 10 * time.Second, Slots: 10, Reserve: 100}.
// tower's TpsBudget::default() has the same numbers. The rule is theirs;
// the window is this package's (slots on a grid of Window/Slots), where
// theirs are slices that begin when a call finds the last one expired.
func ExampleRatio_finagle() {
	const (
		ttl              = 10 * time.Second
		minRetriesPerSec = 10
		percentCanRetry  = 0.2
	)
	b, err := budget.NewRatio(budget.RatioConfig{
		Ratio:   percentCanRetry,
		Window:  ttl,
		Slots:   10, // Finagle's window is 10 slices of the ttl too
		Reserve: minRetriesPerSec * int(ttl/time.Second),
		Clock:   new(budget.ManualClock),
	})
	if err != nil {
		panic(err)
	}
	granted := 0
	for b.Retry(budget.Transient) {
		granted++
	}
	fmt.Println("with no requests:", granted, "retries granted, the next denied")
	for range 1000 {
		b.Request()
	}
	fmt.Println("after 1000 requests:", b.Available(), "more") // 200 + 100 - 100
	// Output:
	// with no requests: 100 retries granted, the next denied
	// after 1000 requests: 200 more
}

func ExampleNewThrottle() {
	// gRPC's retry throttling with maxTokens 10 and tokenRatio 0.1: retries
	// stop once the count is at or below 5.
	b, err := budget.NewThrottle(10, 0.1)
	if err != nil {
		panic(err)
	}
	for i := 0; i < 6; i++ {
		fmt.Print(b.Retry(budget.Transient), " ")
	}
	fmt.Println(b.Available())
	// Output: true true true true false false 4
}

func ExampleConfigError() {
	_, err := budget.NewRatio(budget.RatioConfig{Ratio: 1.5, Window: time.Second, Slots: 10})
	fmt.Println(err)
	fmt.Println(errors.Is(err, budget.ErrInvalidConfig))
	// Output:
	// budget: RatioConfig.Ratio must be in (0, 1], got 1.5
	// true
}

func ExampleManualClock() {
	var clock budget.ManualClock
	clock.Advance(1500 * time.Millisecond)
	clock.Advance(-500 * time.Millisecond) // budgets treat this as the latest reading they saw
	fmt.Println(clock.Now())
	// Output: 1s
}

func ExampleKind() {
	for _, k := range []budget.Kind{budget.FirstAttempt, budget.Transient, budget.Throttled} {
		fmt.Println(k, k.IsRetry())
	}
	// Output:
	// first false
	// transient true
	// throttled true
}

func ExampleRetrier() {
	b, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	if err != nil {
		panic(err)
	}
	// One Retrier and one budget, shared by every call to a dependency.
	r := &budget.Retrier{Budget: b, MaxAttempts: 3, BaseDelay: time.Millisecond}

	calls := 0
	err = r.Do(context.Background(), func(ctx context.Context, a budget.Attempt) error {
		calls++
		if a.N == 1 {
			return errors.New("503 service unavailable") // retried as Transient
		}
		return nil
	})
	fmt.Println(err, calls, b.Available()) // the retry cost 14 and its success refunded it
	// Output: <nil> 2 500
}

func ExampleRetrier_denied() {
	b, err := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 14, TransientCost: 14, ThrottledCost: 5})
	if err != nil {
		panic(err)
	}
	r := &budget.Retrier{Budget: b, MaxAttempts: 5, BaseDelay: time.Millisecond}
	fail := func(context.Context, budget.Attempt) error { return errors.New("connection reset") }

	err = r.Do(context.Background(), fail) // one retry, then the bucket is empty
	fmt.Println(errors.Is(err, budget.ErrDenied))
	fmt.Println(err)
	// Output:
	// true
	// budget: retry denied after 2 attempts: connection reset
}

// send stands for a request to a dependency that drops a retried request it
// has already carried out, by its dedup key.
func send(ctx context.Context, req string, key budget.Key) error { return ctx.Err() }

// The README's retry loop: one Retrier, and the four ways a call gives up.
func ExampleRetrier_errors() {
	b, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	ctx, req := context.Background(), "GET /orders/42"
	r := &budget.Retrier{Budget: b, MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: 20 * time.Second}
	err := r.Do(ctx, func(ctx context.Context, a budget.Attempt) error {
		return send(ctx, req, a.Key) // a.Key is the same for every attempt of this call
	})
	switch {
	case errors.Is(err, budget.ErrDenied): // the budget said no: fail fast
	case errors.Is(err, budget.ErrAttempts): // out of attempts
	case errors.Is(err, budget.ErrNoTime): // the next wait would pass the deadline
	case errors.Is(err, budget.ErrBudgetUnavailable): // the budget could not answer (a ContextBudget failed)
	}
	fmt.Println(err)
	// Output: <nil>
}

// An InFlight caps the retries in flight at a share of the calls in
// flight, as Envoy's retry_budget does. It must hear when attempts and calls
// end; a Retrier tells it.
func ExampleNewInFlight() {
	b, err := budget.NewInFlight(budget.DefaultInFlightConfig()) // 20%, at least 3
	if err != nil {
		panic(err)
	}
	for range 20 {
		b.Request() // 20 calls in flight, each in its first attempt
		b.AttemptEnd(budget.FirstAttempt)
	}
	granted := 0
	for b.Retry(budget.Transient) {
		granted++
	}
	fmt.Println("retries in flight with 20 calls:", granted)
	b.AttemptEnd(budget.Transient) // one retry's attempt ends: its slot is free again
	fmt.Println("after one ended:", b.Retry(budget.Transient))
	// Output:
	// retries in flight with 20 calls: 4
	// after one ended: true
}

// One budget per destination host, built on first use: a failing host
// spends its own budget and leaves the others theirs.
func ExampleNewKeyed() {
	perHost, err := budget.NewKeyed(budget.KeyedConfig[string, *budget.TokenBucket]{
		New: func(host string) (*budget.TokenBucket, error) {
			return budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 2, TransientCost: 1, ThrottledCost: 1})
		},
		MaxKeys:     10_000,
		IdleTimeout: 10 * time.Minute,
	})
	if err != nil {
		panic(err)
	}
	call := func(host string) error {
		b, err := perHost.Get(host)
		if err != nil {
			return err
		}
		r := &budget.Retrier{Budget: b, MaxAttempts: 10, Jitter: func(time.Duration) time.Duration { return 0 }}
		return r.Do(context.Background(), func(ctx context.Context, a budget.Attempt) error {
			if host == "down.example" {
				return errors.New("connection refused")
			}
			return nil
		})
	}
	fmt.Println(call("down.example"))
	fmt.Println(call("up.example"))
	down, _ := perHost.Get("down.example")
	up, _ := perHost.Get("up.example")
	fmt.Println(down.Available(), up.Available(), perHost.Len())
	// Output:
	// budget: retry denied after 3 attempts: connection refused
	// <nil>
	// 0 2 2
}

// Hooks see every attempt, every answer of the budget and every give-up:
// here they log, and a budget's Stats count its answers.
func ExampleHooks() {
	tb, _ := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 1, TransientCost: 1, ThrottledCost: 1})
	r := &budget.Retrier{
		Budget: tb,
		Jitter: func(time.Duration) time.Duration { return 0 },
		Hooks: budget.Hooks{
			OnAttempt: func(_ context.Context, a budget.Attempt) { fmt.Println("attempt", a.N, a.Kind) },
			OnRetry: func(_ context.Context, e budget.RetryEvent) {
				fmt.Println("retry", e.Kind, "granted:", e.Granted, "after", e.Delay)
			},
			OnGiveUp: func(_ context.Context, e budget.GiveUpEvent) {
				fmt.Println("gave up after", e.Attempts, "attempts, denied:", errors.Is(e.Err, budget.ErrDenied))
			},
		},
	}
	_ = r.Do(context.Background(), func(context.Context, budget.Attempt) error { return errors.New("unavailable") })
	fmt.Printf("%+v\n", tb.Stats())
	// Output:
	// attempt 1 first
	// retry transient granted: true after 0s
	// attempt 2 transient
	// retry transient granted: false after 0s
	// gave up after 2 attempts, denied: true
	// {Granted:1 Denied:1}
}

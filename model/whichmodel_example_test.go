package model_test

import (
	"fmt"
	"time"

	"github.com/retrybudget/retrybudget/model"
)

// granted asks m for retries of kind k from the state s until the first
// denial, at most 1000, and returns how many it granted.
func granted[S any](m model.Model[S], s S, k model.Kind) int {
	n := 0
	for ; n < 1000; n++ {
		var ok bool
		if s, ok = m.Step(s, model.OpRetry(k)); !ok {
			break
		}
	}
	return n
}

// after steps m from its initial state through ops.
func after[S any](m model.Model[S], ops ...model.Op) S {
	s := m.Init()
	for _, op := range ops {
		s, _ = m.Step(s, op)
	}
	return s
}

func repeat(op model.Op, n int) []model.Op {
	ops := make([]model.Op, n)
	for i := range ops {
		ops[i] = op
	}
	return ops
}

// The bucket of the article "Retry budgets by language": capacity 40, a
// refill of 1 token a second, 1 token per retry whatever its kind, and a
// bonus of 0.1 token for every success, a successful retry's included (no
// refund of its cost). Quantities are in milli-tokens.
func Example_articleBucket() {
	m := model.TokenBucket{Capacity: 40_000, TransientCost: 1_000, ThrottledCost: 1_000, SuccessBonus: 100, RefillPerSecond: 1_000, NoRefund: true}
	fmt.Println("retries from full:", granted(m, m.Init(), model.Transient))
	// Drained, then 10 successes and half a second: 1 + 0.5 tokens.
	drained := after(m, repeat(model.OpRetry(model.Transient), 40)...)
	s := drained
	for range 10 {
		s, _ = m.Step(s, model.OpSuccess(model.Transient))
	}
	s, _ = m.Step(s, model.OpAdvance(500*time.Millisecond))
	fmt.Println("after 10 successes and 0.5 s:", granted(m, s, model.Transient))
	// Output:
	// retries from full: 40
	// after 10 successes and 0.5 s: 1
}

// The AWS SDK for Go v2's retry quota (retry.NewStandard's default
// RateLimiter, ratelimit.NewTokenRateLimit(500)): 500 tokens, 14 per
// transient retry, 5 per throttled one, the cost back on a successful
// retry, 1 token for a successful first attempt, no refill.
func Example_awsSDK() {
	m := model.AWS()
	fmt.Println("transient retries from full:", granted(m, m.Init(), model.Transient))
	fmt.Println("throttled retries from full:", granted(m, m.Init(), model.Throttled))
	// Output:
	// transient retries from full: 35
	// throttled retries from full: 100
}

// gRPC's retry throttling (gRFC A6), with the service config
// "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}: a retry is
// allowed while more than half the tokens are left, each failure takes
// one, each success gives back 0.1.
func Example_gRPCThrottle() {
	m := model.Throttle{Max: 10_000, Ratio: 100}
	fmt.Println("retries from full:", granted(m, m.Init(), model.Transient))
	// Output:
	// retries from full: 4
}

// The Google SRE book's client-side budget with Envoy's floor: retries up
// to 10% of the requests of the last 10 s, and at least 3.
func Example_googleSRE() {
	m := model.SRE()
	fmt.Println("with no traffic:", granted(m, m.Init(), model.Transient))
	fmt.Println("after 100 requests:", granted(m, after(m, repeat(model.OpRequest, 100)...), model.Transient))
	// Output:
	// with no traffic: 3
	// after 100 requests: 10
}

// Envoy's retry_budget (budget_percent 20, min_retry_concurrency 3), which
// Istio's DestinationRule retryBudget configures too: the retries in flight
// are at most 20% of the calls in flight, and at least 3.
func Example_envoyRetryBudget() {
	m := model.EnvoyDefaults()
	calls := func(n int) model.InFlightState { return after(m, repeat(model.OpRequest, n)...) }
	fmt.Println("retries in flight beside 5 calls:", granted(m, calls(5), model.Transient))
	fmt.Println("beside 50 calls:", granted(m, calls(50), model.Transient))
	// Istio's percent: 10, minRetryConcurrency: 5.
	istio := model.InFlight{PPM: 100_000, MinConcurrency: 5, Rule: model.Envoy}
	fmt.Println("Istio at 10%, at least 5, beside 100 calls:", granted(istio, after(istio, repeat(model.OpRequest, 100)...), model.Transient))
	// Output:
	// retries in flight beside 5 calls: 3
	// beside 50 calls: 10
	// Istio at 10%, at least 5, beside 100 calls: 10
}

// failsafe-go's budget (v0.9.8, budget.New() with its defaults: a maxRate
// of 0.2 and a minConcurrency of 3): the same share and floor as Envoy's,
// with its own rule (model.Failsafe), where the share is of the executions
// in flight, retries included.
func Example_failsafeGo() {
	m := model.FailsafeDefaults()
	fmt.Println(m.Rule == model.Failsafe, m.PPM, m.MinConcurrency)
	// Output:
	// true 200000 3
}

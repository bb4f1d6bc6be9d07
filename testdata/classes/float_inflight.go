package classes

import (
	"math"
	"sync"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// FloatPercentInFlight is Envoy's retry budget, under a mutex, configured
// as Envoy is, by a budget_percent (35.0), which it turns into a float64
// fraction once (35.0 / 100) and multiplies by the calls in flight on every
// retry: a retry is granted while the retries in flight are fewer than
// max(MinConcurrency, ⌊fraction × calls⌋), truncated by math.Floor.
// (Envoy itself computes calls × budget_percent / 100.0, which is exact for
// these counts; precomputing the fraction is what breaks it.)
//
// Class 1, in-flight family (model.InFlight{PPM: 350_000,
// MinConcurrency: 3, Rule: model.Envoy}).
//
// Bug: 0.35 is not a float64; the nearest one is below it, and 0.35 × 180
// rounds to 62.99999999999999, so with 180 calls in flight (and at some
// larger counts) the budget allows 62 retries in flight where the model
// allows 63. For fewer than 180 calls the truncated product is always the
// model's (TestEvidence/FloatPercentInFlight checks every count below 180
// and lists the counts up to 100,000 where the two differ).
//
// The shortest sequence that parts it from its model is therefore a long
// one: 180 requests, after which Available reports 62 where the model's
// balance is 63 (operation 180), then 62 retries, all granted, and the 63rd
// (operation 243), which the model grants and the budget denies (an
// under-grant). Any sequence of 179 operations or fewer answers and
// balances as the model does.
type FloatPercentInFlight struct {
	fraction float64
	min      float64

	mu      sync.Mutex
	calls   int64
	retries int64
}

// NewFloatPercentInFlight returns an empty budget with m's parameters;
// m.Rule must be model.Envoy.
func NewFloatPercentInFlight(m model.InFlight) *FloatPercentInFlight {
	if m.Rule != model.Envoy {
		panic("FloatPercentInFlight: Envoy's rule only")
	}
	percent := float64(m.PPM) / 10_000 // Envoy's budget_percent: 35.0
	return &FloatPercentInFlight{fraction: percent / 100, min: float64(m.MinConcurrency)}
}

func (b *FloatPercentInFlight) limit() float64 {
	return math.Max(b.min, math.Floor(b.fraction*float64(b.calls)))
}

// Request counts a call in flight.
func (b *FloatPercentInFlight) Request() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls < maxCount {
		b.calls++
	}
}

// Retry grants a retry while the rule admits one more in flight.
func (b *FloatPercentInFlight) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retries >= maxCount || float64(b.retries) >= b.limit() {
		return false
	}
	b.retries++
	return true
}

// Success does nothing.
func (b *FloatPercentInFlight) Success(budget.Kind) {}

// AttemptEnd ends a retry in flight.
func (b *FloatPercentInFlight) AttemptEnd(kind budget.Kind) {
	if !kind.IsRetry() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retries > 0 {
		b.retries--
	}
}

// CallEnd ends a call in flight.
func (b *FloatPercentInFlight) CallEnd() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls > 0 {
		b.calls--
	}
}

// Available returns how many more retries the rule would admit now.
func (b *FloatPercentInFlight) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return math.Max(b.limit()-float64(b.retries), 0)
}

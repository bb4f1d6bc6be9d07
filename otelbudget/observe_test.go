package otelbudget_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/otelbudget"
)

func TestObserveTokenBucket(t *testing.T) {
	meter, reader := newMeter(t)
	tb, err := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 10, TransientCost: 4, ThrottledCost: 1})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := otelbudget.Observe(meter, "payments", tb)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	defer reg.Unregister()
	for range 3 {
		tb.Retry(budget.Transient) // granted, granted, denied
	}
	tb.Retry(budget.Throttled) // granted
	s := tb.Stats()
	if s != (budget.Stats{Granted: 3, Denied: 1}) || tb.Available() != 1 {
		t.Fatalf("Stats() = %+v, Available() = %v, want {3 1} and 1", s, tb.Available())
	}
	checkPoints(t, points(t, reader), map[string]float64{
		"retrybudget.budget.retries{retrybudget.budget=payments,retrybudget.granted=true}":  float64(s.Granted),
		"retrybudget.budget.retries{retrybudget.budget=payments,retrybudget.granted=false}": float64(s.Denied),
		"retrybudget.budget.available{retrybudget.budget=payments}":                         tb.Available(),
	})
}

// ctxBalancer is a StatsBudget and ContextBalancer whose balance read
// returns err, and which records the context of the read.
type ctxBalancer struct {
	deny
	balance float64
	err     error
	ctx     context.Context
}

func (b *ctxBalancer) Stats() budget.Stats { return budget.Stats{Granted: 5, Denied: 2} }

func (b *ctxBalancer) AvailableContext(ctx context.Context) (float64, error) {
	b.ctx = ctx
	return b.balance, b.err
}

// Available is the Balancer a ContextBalancer is preferred over.
func (b *ctxBalancer) Available() float64 { return -1 }

type ctxKey struct{}

// A ContextBalancer is read with the collection's context, and a read that
// fails reports no balance, the counts still.
func TestObserveContextBalancer(t *testing.T) {
	meter, reader := newMeter(t)
	b := &ctxBalancer{balance: 7}
	reg, err := otelbudget.Observe(meter, "shared", b)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	defer reg.Unregister()
	counts := map[string]float64{
		"retrybudget.budget.retries{retrybudget.budget=shared,retrybudget.granted=true}":  5,
		"retrybudget.budget.retries{retrybudget.budget=shared,retrybudget.granted=false}": 2,
	}
	withBalance := map[string]float64{"retrybudget.budget.available{retrybudget.budget=shared}": 7}
	for k, v := range counts {
		withBalance[k] = v
	}

	ctx := context.WithValue(context.Background(), ctxKey{}, "collect")
	checkPoints(t, pointsContext(t, ctx, reader), withBalance)
	if b.ctx == nil || b.ctx.Value(ctxKey{}) != "collect" {
		t.Errorf("AvailableContext did not get the collection's context")
	}

	b.err = errors.New("redis down")
	checkPoints(t, points(t, reader), counts)

	b.err = nil
	checkPoints(t, points(t, reader), withBalance)
}

// balanceOnly is a Balancer without Stats.
type balanceOnly struct{ deny }

func (balanceOnly) Available() float64 { return 2.5 }

func TestObserveBalancerOnly(t *testing.T) {
	meter, reader := newMeter(t)
	reg, err := otelbudget.Observe(meter, "local", balanceOnly{})
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	defer reg.Unregister()
	checkPoints(t, points(t, reader), map[string]float64{
		"retrybudget.budget.available{retrybudget.budget=local}": 2.5,
	})
}

func TestObserveNothingToObserve(t *testing.T) {
	meter, reader := newMeter(t)
	reg, err := otelbudget.Observe(meter, "opaque", deny{})
	if err == nil || reg != nil {
		t.Fatalf("Observe(deny{}) = %v, %v, want nil and an error", reg, err)
	}
	if want := `otelbudget: budget "opaque" (otelbudget_test.deny) has no Stats`; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Observe(deny{}) error %q, want it to start %q", err, want)
	}
	checkPoints(t, points(t, reader), map[string]float64{})
}

// Two budgets on one meter report side by side; unregistering one stops
// its reports only.
func TestObserveUnregister(t *testing.T) {
	meter, reader := newMeter(t)
	a, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	b, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	regA, err := otelbudget.Observe(meter, "a", a)
	if err != nil {
		t.Fatalf("Observe(a): %v", err)
	}
	regB, err := otelbudget.Observe(meter, "b", b)
	if err != nil {
		t.Fatalf("Observe(b): %v", err)
	}
	defer regB.Unregister()
	b.Retry(budget.Transient)
	both := map[string]float64{
		"retrybudget.budget.retries{retrybudget.budget=a,retrybudget.granted=true}":  0,
		"retrybudget.budget.retries{retrybudget.budget=a,retrybudget.granted=false}": 0,
		"retrybudget.budget.available{retrybudget.budget=a}":                         500,
		"retrybudget.budget.retries{retrybudget.budget=b,retrybudget.granted=true}":  1,
		"retrybudget.budget.retries{retrybudget.budget=b,retrybudget.granted=false}": 0,
		"retrybudget.budget.available{retrybudget.budget=b}":                         486,
	}
	checkPoints(t, points(t, reader), both)

	if err := regA.Unregister(); err != nil {
		t.Fatalf("Unregister: %v", err)
	}
	for k := range both {
		if strings.Contains(k, "retrybudget.budget=a") {
			delete(both, k)
		}
	}
	checkPoints(t, points(t, reader), both)
}

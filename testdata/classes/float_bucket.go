package classes

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// DimeBonusBucket is a token bucket kept in float64 tokens under a mutex,
// with the AWS SDK's costs, a capacity of 1000 tokens and a bonus of a tenth
// of a token for a successful first attempt: a retry is granted when the
// balance covers its cost, a success deposits the bonus (or refunds a
// retry's cost), up to the capacity.
//
// Class 1, token bucket family (model.TokenBucket{Capacity: 1_000_000,
// TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 100}).
//
// Bug: 0.1 is not a float64, and the sums of bonuses drift from the model's
// milli-tokens: ten bonuses added in [4, 8) tokens make 1 token less 4×2^-50
// (4.9999999999999964 for 5). Costs and refunds are whole tokens and
// subtract or add exactly, so the drift is carried as it is. When the
// model's balance is exactly a retry's cost and the float balance is below
// it, the model grants the retry and the budget denies it (an under-grant).
//
// The shortest sequence that parts it from the model is 86 operations long
// (found by an exhaustive breadth-first search over the pairs of model and
// float states, TestEvidence/DimeBonusBucket): the bucket must first be
// drained from 1000 tokens to a few, which takes 69 transient and 6
// throttled retries (1000 → 4 tokens), then 10 bonuses (5 tokens in the
// model, 4.9999999999999964 in float64), and a throttled retry, which the
// model grants and the budget denies. Every sequence of 85 operations or
// fewer gets the model's answers, and balances within 10^-12 token of the
// model's.
type DimeBonusBucket struct {
	mu       sync.Mutex
	capacity float64
	cost     [3]float64 // by kind
	bonus    float64
	tokens   float64
}

// NewDimeBonusBucket returns a full bucket with m's parameters; m must not
// refill.
func NewDimeBonusBucket(m model.TokenBucket) *DimeBonusBucket {
	if m.RefillPerSecond != 0 || m.NoRefund {
		panic("DimeBonusBucket: no refill and no NoRefund")
	}
	return &DimeBonusBucket{
		capacity: float64(m.Capacity) / milli,
		cost:     [3]float64{0, float64(m.TransientCost) / milli, float64(m.ThrottledCost) / milli},
		bonus:    float64(m.SuccessBonus) / milli,
		tokens:   float64(m.Capacity) / milli,
	}
}

// Request does nothing.
func (b *DimeBonusBucket) Request() {}

// Retry withdraws the cost of a retry of the given kind when the balance
// covers it.
func (b *DimeBonusBucket) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.cost[kind]
	if b.tokens < c {
		return false
	}
	b.tokens -= c
	return true
}

// Success refunds a retry's cost, or deposits the bonus for a first
// attempt, up to the capacity.
func (b *DimeBonusBucket) Success(kind budget.Kind) {
	c := b.bonus
	if kind.IsRetry() {
		c = b.cost[kind]
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens += c
	if b.tokens > b.capacity {
		b.tokens = b.capacity
	}
}

// Available returns the balance in tokens.
func (b *DimeBonusBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tokens
}

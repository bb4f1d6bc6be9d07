package lostupdates

import "github.com/retrybudget/retrybudget/budget"

// milli is one token in milli-tokens.
const milli = 1000

// bucketParams are a token bucket's parameters in milli-tokens, as
// model.TokenBucket states them (no refill).
type bucketParams struct {
	capacity      int64
	transientCost int64
	throttledCost int64
	successBonus  int64
}

func (p bucketParams) cost(k budget.Kind) int64 {
	if k == budget.Throttled {
		return p.throttledCost
	}
	return p.transientCost
}

// credit is what a Success of kind k deposits: the refund of a retry of
// that kind, or the bonus of a successful first attempt.
func (p bucketParams) credit(k budget.Kind) int64 {
	if k.IsRetry() {
		return p.cost(k)
	}
	return p.successBonus
}

// floorDiv returns a / b rounded towards negative infinity; b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// floorMod returns a mod b in [0, b); b > 0.
func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

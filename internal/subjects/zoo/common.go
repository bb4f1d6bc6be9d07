package zoo

import "github.com/retrybudget/retrybudget/budget"

// bucketParams is the shape shared by the token buckets here (milli-tokens).
type bucketParams struct {
	capacity, transient, throttled, bonus int64
}

func (p bucketParams) cost(k budget.Kind) int64 {
	if k == budget.Throttled {
		return p.throttled
	}
	return p.transient
}

// credit is what Success(k) deposits (refund of the retry's cost, or the bonus).
func (p bucketParams) credit(k budget.Kind) int64 {
	if k.IsRetry() {
		return p.cost(k)
	}
	return p.bonus
}

// inflightMax is where the in-flight budgets here stop each count, as
// model.InFlight does: 2^32 - 1.
const inflightMax = 1<<32 - 1

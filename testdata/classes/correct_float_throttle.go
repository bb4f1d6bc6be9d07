package classes

import (
	"math"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// MilliFloatThrottle is gRPC's retry throttling kept in a float64, lock
// free: the count is the bits of a float64 in one atomic word, changed by
// compare-and-swap loops. Correct: the float64 holds whole milli-tokens
// (the maximum, the ratio and every count are integers below 2^53), so
// every sum, difference and comparison is exact and the count never leaves
// the model's.
type MilliFloatThrottle struct {
	max   float64 // milli-tokens
	ratio float64 // milli-tokens
	bits  atomic.Uint64
}

// NewMilliFloatThrottle returns a full throttle with m's parameters.
func NewMilliFloatThrottle(m model.Throttle) *MilliFloatThrottle {
	t := &MilliFloatThrottle{max: float64(m.Max), ratio: float64(m.Ratio)}
	t.bits.Store(math.Float64bits(t.max))
	return t
}

// Request does nothing.
func (t *MilliFloatThrottle) Request() {}

// Retry takes a token and reports whether more than half the maximum is
// left.
func (t *MilliFloatThrottle) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	for {
		old := t.bits.Load()
		n := math.Max(math.Float64frombits(old)-milli, 0)
		if t.bits.CompareAndSwap(old, math.Float64bits(n)) {
			return 2*n > t.max
		}
	}
}

// Success adds the ratio, up to the maximum.
func (t *MilliFloatThrottle) Success(budget.Kind) {
	for {
		old := t.bits.Load()
		n := math.Min(math.Float64frombits(old)+t.ratio, t.max)
		if t.bits.CompareAndSwap(old, math.Float64bits(n)) {
			return
		}
	}
}

// Available returns the token count.
func (t *MilliFloatThrottle) Available() float64 {
	return math.Float64frombits(t.bits.Load()) / milli
}

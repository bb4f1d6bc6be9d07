package classes

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// GRPCFloatThrottle is gRPC's retry throttling kept as grpc-go keeps it:
// the token count, the maximum, the threshold (half the maximum) and the
// token ratio are float64 tokens, under a mutex. A retryable failure takes
// 1 token (down to 0) and the retry is granted while what is left is
// strictly above the threshold; a success adds the ratio, up to the maximum.
//
// Class 1, throttle family (model.Throttle{Max: 10_000, Ratio: 100}).
//
// Bug: 0.1 is not a float64, and neither are most sums of it, so the count
// drifts from the model's milli-tokens by a few units in the last place.
// Subtracting 1 and clamping at 0 or the maximum are exact, so the drift
// only ever comes from successes, and it matters only when the model's count
// is exactly 5 tokens (the threshold) after a retry and the float count is
// above it: then the budget grants a retry the model denies (an
// over-grant). Additions of 0.1 between 1 and 2 tokens round up (by
// 0.4 × 2^-52 each) and additions at 4 tokens and above round down (by
// 0.4 × 2^-50 each), so the upward drift must first be built up at low
// counts, over several cycles, before the count is carried past 4 to 6.
//
// The shortest sequence that parts it from the model is 126 operations
// long (found by an exhaustive breadth-first search over the pairs of
// model and float states, TestEvidence/GRPCFloatThrottle): 9 retries
// (10 → 1 token), 9 successes (1.9), 5 times a retry and 10 successes
// (1.9 → 0.9 → 1.9, the drift growing each time), a retry (0.9), 51
// successes (6 tokens in the model, 6.000000000000001 in float64) and a
// last retry: the model is left with 5 tokens and denies it; the budget is
// left with 5.000000000000001 and grants it. Every sequence of 125
// operations or fewer gets the model's answers, and balances within 10^-14
// token of the model's.
type GRPCFloatThrottle struct {
	mu     sync.Mutex
	max    float64
	thresh float64
	ratio  float64
	tokens float64
}

// NewGRPCFloatThrottle returns a full throttle with m's parameters.
func NewGRPCFloatThrottle(m model.Throttle) *GRPCFloatThrottle {
	max := float64(m.Max) / milli
	return &GRPCFloatThrottle{max: max, thresh: max / 2, ratio: float64(m.Ratio) / milli, tokens: max}
}

// Request does nothing.
func (t *GRPCFloatThrottle) Request() {}

// Retry takes a token and reports whether more than half the maximum is
// left; a kind that is not a retry kind is denied and takes nothing.
func (t *GRPCFloatThrottle) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens--
	if t.tokens < 0 {
		t.tokens = 0
	}
	return t.tokens > t.thresh
}

// Success adds the token ratio, up to the maximum.
func (t *GRPCFloatThrottle) Success(budget.Kind) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens += t.ratio
	if t.tokens > t.max {
		t.tokens = t.max
	}
}

// Available returns the token count.
func (t *GRPCFloatThrottle) Available() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tokens
}

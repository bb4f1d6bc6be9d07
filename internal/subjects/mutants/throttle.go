package mutants

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// ThresholdOffByOne is gRPC retry throttling that allows a retry while the
// count is at least half of max tokens, instead of strictly more than half.
// At exactly max/2 it grants one retry the gRFC forbids, and it keeps doing
// so for as long as the count sits there, which is where an outage keeps it.
//
// Bug class: an inclusive comparison where the specification says "greater
// than" (gRFC A6 allows a retry only while token_count > max_tokens/2).
// Caught by the sequential check.
type ThresholdOffByOne struct {
	mu     sync.Mutex
	m      model.Throttle
	tokens int64
}

var _ budget.Budget = (*ThresholdOffByOne)(nil)

// NewThresholdOffByOne returns a full ThresholdOffByOne for m.
func NewThresholdOffByOne(m model.Throttle) *ThresholdOffByOne {
	return &ThresholdOffByOne{m: m, tokens: m.Max}
}

func (t *ThresholdOffByOne) Request() {}

func (t *ThresholdOffByOne) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = max(t.tokens-1000, 0)
	return 2*t.tokens >= t.m.Max // BUG: >= where the gRFC says >
}

func (t *ThresholdOffByOne) Success(budget.Kind) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = min(t.tokens+t.m.Ratio, t.m.Max)
}

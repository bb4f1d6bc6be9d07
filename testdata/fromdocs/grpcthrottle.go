package fromdocs

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// GRPCModel is the rule GRPCThrottle follows: maxTokens 7, tokenRatio 0.35.
var GRPCModel = model.Throttle{Max: 7_000, Ratio: 350}

// GRPCThrottle is gRPC's retry throttling (gRFC A6, model.Throttle) behind
// a sync.RWMutex: every retryable failure takes one token (down to 0),
// every success adds tokenRatio (up to maxTokens), and a retry is allowed
// while more than maxTokens/2 remain after the failure's token. Writers
// (Retry, Failed, Success) hold the write lock; Available holds the read
// lock. It is a budget.FailureCounter.
//
// Linearizability: every call that changes the count holds the write lock
// for its whole read-modify-write, so the writers are totally ordered and
// each takes effect inside its critical section; Available holds the read
// lock, which excludes every writer, and changes nothing. Nothing reads a
// clock. Request changes nothing and takes no lock.
type GRPCThrottle struct {
	max, ratio int64 // milli-tokens

	mu     sync.RWMutex
	tokens int64 // milli-tokens
}

var _ budget.FailureCounter = (*GRPCThrottle)(nil)

// NewGRPC returns a full throttle following m.
func NewGRPC(m model.Throttle) *GRPCThrottle {
	return &GRPCThrottle{max: m.Max, ratio: m.Ratio, tokens: m.Max}
}

// Request does nothing.
func (t *GRPCThrottle) Request() {}

// Retry takes one token for a retryable failure and reports whether more
// than half of maxTokens remain.
func (t *GRPCThrottle) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = max(t.tokens-1000, 0)
	return 2*t.tokens > t.max
}

// Failed takes one token for a retryable failure after which no retry is
// asked for.
func (t *GRPCThrottle) Failed(kind budget.Kind) { t.Retry(kind) }

// Success adds tokenRatio, up to maxTokens.
func (t *GRPCThrottle) Success(budget.Kind) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = min(t.tokens+t.ratio, t.max)
}

// Available returns the token count.
func (t *GRPCThrottle) Available() float64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return float64(t.tokens) / 1000
}

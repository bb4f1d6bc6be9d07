package lostupdates

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// CASThrottle is gRPC retry throttling (gRFC A6, model.Throttle{Max:
// 10_000, Ratio: 100}: maxTokens 10, tokenRatio 0.1) on one atomic word of
// milli-tokens. Retry takes one token, down to zero, and grants the retry
// while more than half of maxTokens remain; Success adds tokenRatio up to
// maxTokens. Both are compare-and-swap loops. Retry computes its answer
// from the count it read before its first compare-and-swap, so that the
// common uncontended path does one load, one CAS and no re-read.
//
// BUG: when the compare-and-swap fails, the loop reloads the count and
// retries the CAS with the fresh value, but keeps the answer it computed
// from the first (now stale) read: a retry can be granted although the
// token it took left the count at or below half of maxTokens.
type CASThrottle struct {
	max    int64 // milli-tokens
	ratio  int64 // milli-tokens per success
	tokens atomic.Int64
}

// NewCASThrottle returns a full CASThrottle; quantities in milli-tokens.
func NewCASThrottle(max, ratio int64) *CASThrottle {
	t := &CASThrottle{max: max, ratio: ratio}
	t.tokens.Store(max)
	return t
}

// Request does nothing.
func (t *CASThrottle) Request() {}

// Retry takes one token and reports whether more than half remain.
func (t *CASThrottle) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	old := t.tokens.Load()
	n := max(old-milli, 0)
	granted := 2*n > t.max
	for n != old && !t.tokens.CompareAndSwap(old, n) {
		old = t.tokens.Load()
		n = max(old-milli, 0)
	}
	return granted
}

// Success adds tokenRatio, up to max.
func (t *CASThrottle) Success(budget.Kind) {
	for {
		old := t.tokens.Load()
		n := min(old+t.ratio, t.max)
		if n == old || t.tokens.CompareAndSwap(old, n) {
			return
		}
	}
}

// Available returns the token count, for metrics.
func (t *CASThrottle) Available() float64 { return float64(t.tokens.Load()) / milli }

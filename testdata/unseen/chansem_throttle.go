package unseen

import (
	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// ChanSemThrottle is a correct gRPC retry throttle (gRFC A6,
// model.Throttle) whose count is guarded by a buffered channel of capacity
// one used as a mutex: a call sends to take it and receives to give it
// back. A send on a full channel blocks until the holder's receive, and
// that receive happens before the send completes, so each critical section
// sees every write of the one before it.
type ChanSemThrottle struct {
	m      model.Throttle
	sem    chan struct{}
	tokens int64 // milli-tokens; guarded by sem
}

// NewChanSemThrottle returns a full throttle following m.
func NewChanSemThrottle(m model.Throttle) *ChanSemThrottle {
	return &ChanSemThrottle{m: m, sem: make(chan struct{}, 1), tokens: m.Max}
}

func (t *ChanSemThrottle) lock()   { t.sem <- struct{}{} }
func (t *ChanSemThrottle) unlock() { <-t.sem }

// Request does nothing.
func (t *ChanSemThrottle) Request() {}

// Retry takes a token for a retryable failure and reports whether more than
// half of the maximum is left.
func (t *ChanSemThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	t.lock()
	defer t.unlock()
	t.tokens = max(t.tokens-milli, 0)
	return 2*t.tokens > t.m.Max
}

// Success adds the ratio, up to the maximum.
func (t *ChanSemThrottle) Success(budget.Kind) {
	t.lock()
	defer t.unlock()
	t.tokens = min(t.tokens+t.m.Ratio, t.m.Max)
}

// Available returns the token count.
func (t *ChanSemThrottle) Available() float64 {
	t.lock()
	defer t.unlock()
	return float64(t.tokens) / milli
}

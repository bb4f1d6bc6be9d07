package zoo

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
)

// MutexInFlight is Envoy's retry_budget with both counts, the calls and the
// retries in flight, as plain int64 fields under one sync.Mutex. A retry is
// granted while the retries in flight are fewer than max(minConcurrency,
// ⌊ppm × calls / 1e6⌋). Ends of nothing in flight are ignored, and each
// count stops at 2^32 - 1.
type MutexInFlight struct {
	ppm, minConc int64

	mu      sync.Mutex
	calls   int64
	retries int64
}

// NewMutexInFlight returns a budget with nothing in flight; ppm is the
// share of the calls in flight that may be retries, in parts per million.
func NewMutexInFlight(ppm, minConcurrency int64) *MutexInFlight {
	return &MutexInFlight{ppm: ppm, minConc: minConcurrency}
}

// limit is the retries in flight allowed with calls in flight; mu held.
func (b *MutexInFlight) limit() int64 {
	return max(b.minConc, b.ppm*b.calls/1_000_000)
}

func (b *MutexInFlight) Request() {
	b.mu.Lock()
	if b.calls < inflightMax {
		b.calls++
	}
	b.mu.Unlock()
}

func (b *MutexInFlight) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retries >= inflightMax || b.retries >= b.limit() {
		return false
	}
	b.retries++
	return true
}

// Success does nothing: the budget recovers as retries end.
func (b *MutexInFlight) Success(budget.Kind) {}

func (b *MutexInFlight) AttemptEnd(k budget.Kind) {
	if !k.IsRetry() {
		return
	}
	b.mu.Lock()
	if b.retries > 0 {
		b.retries--
	}
	b.mu.Unlock()
}

func (b *MutexInFlight) CallEnd() {
	b.mu.Lock()
	if b.calls > 0 {
		b.calls--
	}
	b.mu.Unlock()
}

// Available returns how many more retries would be granted now.
func (b *MutexInFlight) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := min(b.limit(), inflightMax)
	if b.retries >= l {
		return 0
	}
	return float64(l - b.retries)
}

// Package quota is a small retry budget for the instrument package's
// end-to-end test: a mutex guards its tokens, an atomic counts its grants,
// and a channel carries its events. The test runs it only through the
// overlay Rewrite writes.
package quota

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// Quota grants a retry for 5 tokens and earns 1 token per success.
type Quota struct {
	mu      sync.Mutex
	tokens  int
	granted atomic.Int64
	events  chan budget.Kind
}

var _ budget.Budget = (*Quota)(nil)

// New returns a quota of the given tokens that keeps the last 64 events.
func New(tokens int) *Quota {
	return &Quota{tokens: tokens, events: make(chan budget.Kind, 64)}
}

// Request does nothing: first attempts are free.
func (q *Quota) Request() {}

// Retry grants a retry if 5 tokens are left.
func (q *Quota) Retry(kind budget.Kind) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !kind.IsRetry() || q.tokens < 5 {
		return false
	}
	q.tokens -= 5
	q.granted.Add(1)
	select {
	case q.events <- kind:
	default:
	}
	return true
}

// Success earns a token.
func (q *Quota) Success(budget.Kind) {
	q.mu.Lock()
	q.tokens++
	q.mu.Unlock()
}

// Granted returns how many retries were granted.
func (q *Quota) Granted() int64 { return q.granted.Load() }

// Events returns the kinds of the granted retries still kept.
func (q *Quota) Events() []budget.Kind {
	var kinds []budget.Kind
	for {
		select {
		case k := <-q.events:
			kinds = append(kinds, k)
		default:
			return kinds
		}
	}
}

// Check panics if the tokens went negative.
func (q *Quota) Check() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.tokens < 0 {
		panic("quota: negative tokens") // the line TestPanicNamesTheOriginalLine looks for
	}
}

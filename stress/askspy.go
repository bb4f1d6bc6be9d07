package stress

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
)

// grantAll is an askSpy's grants when it grants every retry.
const grantAll = 1 << 30

// askSpy is the budget of one call of a check that counts how a loop asks:
// it grants the first grants retries and denies the rest (first attempts
// are never granted, as a Kind that is no retry asks for nothing). If
// cancel is set, the spy calls it once the loop has asked 20 times past
// the grants, so that a loop that asks again after every denial ends.
type askSpy struct {
	grants int
	cancel func()

	mu   sync.Mutex
	asks int
}

func (s *askSpy) Request()            {}
func (s *askSpy) Success(budget.Kind) {}

func (s *askSpy) Retry(k budget.Kind) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asks++
	if s.cancel != nil && s.asks > s.grants+20 {
		s.cancel()
	}
	return k.IsRetry() && s.asks <= s.grants
}

// asked is how many times the loop asked the spy.
func (s *askSpy) asked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asks
}

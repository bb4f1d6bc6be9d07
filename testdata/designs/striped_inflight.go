package designs

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// stripes is how many separately locked counters StripedInFlight spreads
// the calls in flight over.
const stripes = 4

// StripedInFlight is an in-flight retry budget whose calls in flight are
// counted in stripes counters, each under a mutex of its own on a cache
// line of its own, so that the frequent Request and CallEnd of different
// calls rarely contend. Calls are anonymous counts, so a Request and the
// CallEnd of the same call may use different stripes: each call picks a
// stripe round-robin.
//
//   - Request takes one stripe's lock and counts the call there while that
//     stripe is below its share of the cap (shares sum to 2^32 - 1);
//     otherwise it takes every stripe's lock in order and counts the call
//     in any stripe below its share, or nowhere when the total is at the
//     cap.
//   - CallEnd takes one stripe's lock and ends a call there when the stripe
//     counts one; otherwise it releases it, takes every stripe's lock in
//     order and ends a call in any stripe that counts one, or nowhere when
//     none does.
//   - Retry takes every stripe's lock in index order, then the lock of the
//     retries in flight, sums the calls and decides by the rule.
//   - AttemptEnd takes only the retries' lock.
//
// Linearizability: every call is a critical section over a set of locks,
// all taken before any is released and in one global order (stripes by
// index, then the retries' lock), so there is no deadlock and the calls
// are strict two-phase locked: each is linearized at the moment it holds
// all of its locks. A call that holds one stripe's lock changes only that
// stripe, and its decision is sound for the total: a stripe below its
// share means the total is below the cap (no stripe ever exceeds its
// share), and a stripe that counts a call means a call is in flight. A
// Retry holds every stripe and the retries, so the counts it decides on
// are the counts at its linearization point.
type StripedInFlight struct {
	cfg  InFlightConfig
	pick atomic.Uint32

	stripe [stripes]struct {
		mu    sync.Mutex
		calls int64
		_     [48]byte
	}

	rmu     sync.Mutex
	retries int64 // guarded by rmu
}

var _ budget.InFlightBudget = (*StripedInFlight)(nil)

// NewStripedInFlight returns a StripedInFlight with nothing in flight.
func NewStripedInFlight(cfg InFlightConfig) *StripedInFlight {
	return &StripedInFlight{cfg: cfg}
}

// share returns the most calls stripe i may count.
func share(i int) int64 {
	s := int64(maxInFlight / stripes)
	if int64(i) < maxInFlight%stripes {
		s++
	}
	return s
}

func (b *StripedInFlight) next() int { return int(b.pick.Add(1) % stripes) }

func (b *StripedInFlight) lockAll() {
	for i := range b.stripe {
		b.stripe[i].mu.Lock()
	}
}

func (b *StripedInFlight) unlockAll() {
	for i := len(b.stripe) - 1; i >= 0; i-- {
		b.stripe[i].mu.Unlock()
	}
}

// Request counts a call in flight, unless 2^32 - 1 are.
func (b *StripedInFlight) Request() {
	i := b.next()
	s := &b.stripe[i]
	s.mu.Lock()
	if s.calls < share(i) {
		s.calls++
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	b.lockAll()
	defer b.unlockAll()
	for j := range b.stripe {
		if b.stripe[j].calls < share(j) {
			b.stripe[j].calls++
			return
		}
	}
}

// CallEnd ends a call in flight; it does nothing when none is.
func (b *StripedInFlight) CallEnd() {
	s := &b.stripe[b.next()]
	s.mu.Lock()
	if s.calls > 0 {
		s.calls--
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	b.lockAll()
	defer b.unlockAll()
	for j := range b.stripe {
		if b.stripe[j].calls > 0 {
			b.stripe[j].calls--
			return
		}
	}
}

// Retry grants a retry of a retry kind while the rule admits one more
// retry in flight, and counts it in flight.
func (b *StripedInFlight) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	b.lockAll()
	defer b.unlockAll()
	b.rmu.Lock()
	defer b.rmu.Unlock()
	if !b.cfg.admits(b.retries, b.callsLocked()) {
		return false
	}
	b.retries++
	return true
}

// callsLocked sums the stripes; every stripe's lock must be held.
func (b *StripedInFlight) callsLocked() int64 {
	var n int64
	for i := range b.stripe {
		n += b.stripe[i].calls
	}
	return n
}

// Success does nothing: the budget recovers as retries end.
func (b *StripedInFlight) Success(budget.Kind) {}

// AttemptEnd ends a retry in flight when k is a retry kind and one is in
// flight.
func (b *StripedInFlight) AttemptEnd(k budget.Kind) {
	if !k.IsRetry() {
		return
	}
	b.rmu.Lock()
	if b.retries > 0 {
		b.retries--
	}
	b.rmu.Unlock()
}

// Available returns how many more retries would be granted now, with
// nothing else changing.
func (b *StripedInFlight) Available() float64 {
	b.lockAll()
	defer b.unlockAll()
	b.rmu.Lock()
	defer b.rmu.Unlock()
	return b.cfg.available(b.retries, b.callsLocked())
}

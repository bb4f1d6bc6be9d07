package classes

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// SeqlockInFlight is LateBumpSeqlockInFlight with a correct seqlock:
// failsafe-go's in-flight budget keeping the executions and the retries in
// flight in atomics, written under a mutex, with a lock-free deny path.
// Correct: writers make the sequence counter odd before their stores and
// even after them, and the reader uses a snapshot only when the counter was
// even before its loads and unchanged after them, so no write overlapped
// them and the pair is one the budget held during the call.
type SeqlockInFlight struct {
	m model.InFlight

	mu      sync.Mutex
	seq     atomic.Uint64
	execs   atomic.Int64
	retries atomic.Int64
}

// NewSeqlockInFlight returns an empty budget with m's parameters; m.Rule
// must be model.Failsafe.
func NewSeqlockInFlight(m model.InFlight) *SeqlockInFlight {
	if m.Rule != model.Failsafe {
		panic("SeqlockInFlight: failsafe-go's rule only")
	}
	return &SeqlockInFlight{m: m}
}

// write stores the two counts under the sequence counter. b.mu must be
// held.
func (b *SeqlockInFlight) write(execs, retries int64) {
	b.seq.Add(1)
	b.execs.Store(execs)
	b.retries.Store(retries)
	b.seq.Add(1)
}

// Request counts a call in flight.
func (b *SeqlockInFlight) Request() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, r := b.execs.Load(), b.retries.Load(); e-r < maxCount {
		b.write(e+1, r)
	}
}

// CallEnd ends a call in flight.
func (b *SeqlockInFlight) CallEnd() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, r := b.execs.Load(), b.retries.Load(); e-r > 0 {
		b.write(e-1, r)
	}
}

// Retry grants a retry while the rule admits one more in flight.
func (b *SeqlockInFlight) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	if v1 := b.seq.Load(); v1&1 == 0 {
		r, e := b.retries.Load(), b.execs.Load()
		if b.seq.Load() == v1 && (r >= maxCount || !failsafeAdmits(b.m, r, e-r)) {
			return false
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r, e := b.retries.Load(), b.execs.Load()
	if r >= maxCount || !failsafeAdmits(b.m, r, e-r) {
		return false
	}
	b.write(e+1, r+1)
	return true
}

// Success does nothing.
func (b *SeqlockInFlight) Success(budget.Kind) {}

// AttemptEnd ends a retry in flight.
func (b *SeqlockInFlight) AttemptEnd(kind budget.Kind) {
	if !kind.IsRetry() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, r := b.execs.Load(), b.retries.Load(); r > 0 {
		b.write(e-1, r-1)
	}
}

// Available returns how many more retries the rule admits now.
func (b *SeqlockInFlight) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, r := b.execs.Load(), b.retries.Load()
	return ifAvailable(failsafeLimit(b.m, e-r), r)
}

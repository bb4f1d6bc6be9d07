package classes

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// LateBumpSeqlockInFlight is failsafe-go's in-flight budget (a retry is
// denied when at least MinConcurrency retries are in flight and they are
// more than PPM of the executions in flight, calls plus retries), keeping,
// as failsafe-go counts them, the executions in flight and the retries in
// flight. Writers hold a mutex and store both counts in atomics, then bump
// a version counter; Retry first tries a lock-free deny: it reads the
// version, the retries, the executions and the version again, and when the
// two versions agree and the rule does not admit a retry, it denies without
// the lock.
//
// Class 3, in-flight family (model.FailsafeDefaults(): 20%, at least 3).
//
// Bug: the writer bumps the version once, after its stores, instead of
// making it odd before them and even after; so while a writer is between
// its two stores the version has not moved, and a reader that runs entirely
// there accepts a torn pair. AttemptEnd stores the executions before the
// retries. With 12 calls and 3 retries in flight (15 executions; 3 is 20%
// of 15, admitted):
//
//	g1: AttemptEnd(transient): lock, executions = 14
//	g2: Retry: version v, 3 retries, 14 executions, version v → 3 > 20% of 14 → denied
//	g1: retries = 2, version v+1, unlock
//
// Before the end the rule admits a 4th retry (3 of 15), after it too (2 of
// 14): in every order the model grants g2's retry (an under-grant). The
// wrong answer needs g1 preempted between its two stores (testHook point
// "seqlock.inflight.write").
type LateBumpSeqlockInFlight struct {
	m model.InFlight

	mu      sync.Mutex // serializes writers
	version atomic.Uint64
	execs   atomic.Int64 // calls + retries in flight
	retries atomic.Int64
}

// NewLateBumpSeqlockInFlight returns an empty budget with m's parameters;
// m.Rule must be model.Failsafe.
func NewLateBumpSeqlockInFlight(m model.InFlight) *LateBumpSeqlockInFlight {
	if m.Rule != model.Failsafe {
		panic("LateBumpSeqlockInFlight: failsafe-go's rule only")
	}
	return &LateBumpSeqlockInFlight{m: m}
}

// Request counts a call in flight.
func (b *LateBumpSeqlockInFlight) Request() {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, r := b.execs.Load(), b.retries.Load()
	if e-r < maxCount {
		b.execs.Store(e + 1)
		b.version.Add(1)
	}
}

// CallEnd ends a call in flight.
func (b *LateBumpSeqlockInFlight) CallEnd() {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, r := b.execs.Load(), b.retries.Load()
	if e-r > 0 {
		b.execs.Store(e - 1)
		b.version.Add(1)
	}
}

// Retry grants a retry while the rule admits one more in flight.
func (b *LateBumpSeqlockInFlight) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	v1 := b.version.Load()
	r, e := b.retries.Load(), b.execs.Load()
	if v2 := b.version.Load(); v1 == v2 && (r >= maxCount || !failsafeAdmits(b.m, r, e-r)) {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r, e = b.retries.Load(), b.execs.Load()
	if r >= maxCount || !failsafeAdmits(b.m, r, e-r) {
		return false
	}
	b.execs.Store(e + 1)
	b.retries.Store(r + 1)
	b.version.Add(1)
	return true
}

// Success does nothing.
func (b *LateBumpSeqlockInFlight) Success(budget.Kind) {}

// AttemptEnd ends a retry in flight.
func (b *LateBumpSeqlockInFlight) AttemptEnd(kind budget.Kind) {
	if !kind.IsRetry() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, r := b.execs.Load(), b.retries.Load()
	if r > 0 {
		b.execs.Store(e - 1)
		hook("seqlock.inflight.write")
		b.retries.Store(r - 1)
		b.version.Add(1)
	}
}

// Available returns how many more retries the rule admits now.
func (b *LateBumpSeqlockInFlight) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, r := b.execs.Load(), b.retries.Load()
	return ifAvailable(failsafeLimit(b.m, e-r), r)
}

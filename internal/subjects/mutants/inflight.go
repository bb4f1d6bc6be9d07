package mutants

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// The mutants of this file are in-flight budgets with Envoy's rule: a retry
// is granted while the retries in flight are fewer than
// max(MinConcurrency, ⌊PPM × calls in flight / 1e6⌋). Each is built from a
// model.InFlight, whose Rule it ignores, and each has one bug.

// envoyLimit returns the retries in flight Envoy's rule allows with calls
// in flight.
func envoyLimit(m model.InFlight, calls int64) int64 {
	return max(m.MinConcurrency, m.PPM*max(calls, 0)/1_000_000)
}

// decrementClamped takes one from c unless it is zero, by compare-and-swap.
func decrementClamped(c *atomic.Int64) {
	for {
		n := c.Load()
		if n <= 0 || c.CompareAndSwap(n, n-1) {
			return
		}
	}
}

// InFlightCheckThenAct keeps the calls and the retries in flight in two
// atomic counters and grants a retry by loading the retries, comparing them
// with the limit, and then incrementing them with a separate Add: no
// compare-and-swap loop ties the increment to the value compared. Two
// retries that both load the count one below the limit are both granted, so
// the retries in flight pass the limit by as many as ask at once. Every
// access is atomic, so the race detector stays silent.
//
// Bug class: check-then-act on atomics. It comes from a port of Envoy's
// retry budget, which reads the active-retry gauge, compares it, and bumps
// it in a later step (there one thread owns the gauge; in a Go budget shared
// by every goroutine the step is a window), and from the belief that a
// sequence of atomic operations is itself atomic.
type InFlightCheckThenAct struct {
	m       model.InFlight
	calls   atomic.Int64
	retries atomic.Int64
}

var _ budget.InFlightBudget = (*InFlightCheckThenAct)(nil)

// NewInFlightCheckThenAct returns an InFlightCheckThenAct for m with nothing
// in flight.
func NewInFlightCheckThenAct(m model.InFlight) *InFlightCheckThenAct {
	return &InFlightCheckThenAct{m: m}
}

func (b *InFlightCheckThenAct) Request() { b.calls.Add(1) }

func (b *InFlightCheckThenAct) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	if b.retries.Load() >= envoyLimit(b.m, b.calls.Load()) { // check ...
		return false
	}
	b.retries.Add(1) // ... then act: BUG, another retry may have taken the last slot in between
	return true
}

func (b *InFlightCheckThenAct) Success(budget.Kind) {}

func (b *InFlightCheckThenAct) AttemptEnd(k budget.Kind) {
	if k.IsRetry() {
		decrementClamped(&b.retries)
	}
}

func (b *InFlightCheckThenAct) CallEnd() { decrementClamped(&b.calls) }

// inFlightCounts is a mutex-guarded pair of counts with Envoy's rule, which
// the mutants below share where their bug is not in the counting itself.
type inFlightCounts struct {
	mu      sync.Mutex
	m       model.InFlight
	calls   int64
	retries int64
}

func (b *inFlightCounts) Request() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
}

func (b *inFlightCounts) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retries >= envoyLimit(b.m, b.calls) {
		return false
	}
	b.retries++
	return true
}

// releaseRetry ends one retry in flight, clamped at zero; b.mu is held.
func (b *inFlightCounts) releaseRetry() {
	if b.retries > 0 {
		b.retries--
	}
}

func (b *inFlightCounts) CallEnd() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls > 0 {
		b.calls--
	}
}

// ReleaseOnSuccessOnly releases a retry's slot in Success, when the retry
// succeeds, and does nothing in AttemptEnd. A retry that fails, times out,
// is cancelled during its backoff or panics never succeeds, so its slot is
// never given back: each such retry leaks one slot for the life of the
// budget, and after MinConcurrency failed retries (more, while many calls
// are in flight) it denies every retry, though nothing is in flight. During
// an outage, when every retry fails, it stops retrying for good.
//
// Bug class: a release on the success path only, the missing release of a
// semaphore on the error path (the "return before Release" bug). It comes
// from budgets written against the plain Budget interface, whose only
// "done" signal is Success, and adapted to count work in flight by putting
// the release where the refund used to be.
type ReleaseOnSuccessOnly struct{ inFlightCounts }

var _ budget.InFlightBudget = (*ReleaseOnSuccessOnly)(nil)

// NewReleaseOnSuccessOnly returns a ReleaseOnSuccessOnly for m with nothing
// in flight.
func NewReleaseOnSuccessOnly(m model.InFlight) *ReleaseOnSuccessOnly {
	return &ReleaseOnSuccessOnly{inFlightCounts{m: m}}
}

func (b *ReleaseOnSuccessOnly) Success(k budget.Kind) {
	if !k.IsRetry() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseRetry() // BUG: the release belongs in AttemptEnd, which every retry reaches
}

func (b *ReleaseOnSuccessOnly) AttemptEnd(budget.Kind) {}

// DoubleRelease releases a retry's slot in Success, when the retry
// succeeds, and again in AttemptEnd, which follows every attempt. A retry
// that succeeds is released twice: it frees the slot of another retry still
// in flight, so the retries in flight pass the limit by one for each
// successful retry while others are out. The count is clamped at zero, as a
// careful implementation clamps it, which hides the bug while only one
// retry is ever in flight.
//
// Bug class: a double release, a resource freed on two paths that both run.
// It comes from adding AttemptEnd to a budget that already released in
// Success (the release moved to the end of the attempt, and the old one was
// left in), or from a deferred release next to an explicit one.
type DoubleRelease struct{ inFlightCounts }

var _ budget.InFlightBudget = (*DoubleRelease)(nil)

// NewDoubleRelease returns a DoubleRelease for m with nothing in flight.
func NewDoubleRelease(m model.InFlight) *DoubleRelease {
	return &DoubleRelease{inFlightCounts{m: m}}
}

func (b *DoubleRelease) Success(k budget.Kind) {
	if !k.IsRetry() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseRetry() // BUG: AttemptEnd releases this retry too
}

func (b *DoubleRelease) AttemptEnd(k budget.Kind) {
	if !k.IsRetry() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseRetry()
}

// PendingMiscounted counts a call in flight only while one of its attempts
// is: the count of calls goes up at Request and at each granted retry, and
// down at every AttemptEnd, and CallEnd does nothing. The ratio part of the
// limit is computed from the attempts in flight, not the calls: a call
// waiting in the backoff between a failed attempt and its retry, or one
// whose retry was just denied, is not counted, and the budget denies
// retries that Envoy's rule grants; a call with two attempts out at once (a
// retry granted before the first attempt ended, as a hedge does) is counted
// twice, and the budget grants retries the rule denies. It shows once
// enough calls are in flight that the ratio, not MinConcurrency, sets the
// limit (20 with Envoy's defaults), and only while some call is not in
// exactly one attempt: the denominator is right whenever every call is.
//
// Bug class: the wrong denominator, active attempts in place of active
// requests. It comes from taking the count of calls from the connection
// pool's active-request gauge (Envoy's rq_active, an HTTP client's
// in-flight requests), which drops while a call waits to retry, where
// Envoy's budget counts active and pending requests.
type PendingMiscounted struct {
	mu      sync.Mutex
	m       model.InFlight
	calls   int64 // BUG: attempts in flight, not calls
	retries int64
}

var _ budget.InFlightBudget = (*PendingMiscounted)(nil)

// NewPendingMiscounted returns a PendingMiscounted for m with nothing in
// flight.
func NewPendingMiscounted(m model.InFlight) *PendingMiscounted {
	return &PendingMiscounted{m: m}
}

func (b *PendingMiscounted) Request() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
}

func (b *PendingMiscounted) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retries >= envoyLimit(b.m, b.calls) {
		return false
	}
	b.retries++
	b.calls++ // the retry's attempt is a request in flight again
	return true
}

func (b *PendingMiscounted) Success(budget.Kind) {}

func (b *PendingMiscounted) AttemptEnd(k budget.Kind) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls > 0 {
		b.calls-- // the attempt's request is no longer active
	}
	if k.IsRetry() && b.retries > 0 {
		b.retries--
	}
}

func (b *PendingMiscounted) CallEnd() {}

// FloorNotMax allows MinConcurrency retries in flight on top of the ratio's
// share of the calls in flight, MinConcurrency + ⌊PPM × calls / 1e6⌋, where
// Envoy allows the larger of the two. With few calls in flight the two
// agree (the ratio's share is zero below 5 calls with Envoy's defaults);
// from then on it grants MinConcurrency more retries in flight than the
// rule does, at every load, which is the amplification the budget exists to
// cap.
//
// Bug class: a floor added instead of taken as a maximum, the formula
// misread. It comes from documentation that calls min_retry_concurrency the
// retries "always allowed", read as an allowance on top of the percentage.
type FloorNotMax struct{ inFlightCounts }

var _ budget.InFlightBudget = (*FloorNotMax)(nil)

// NewFloorNotMax returns a FloorNotMax for m with nothing in flight.
func NewFloorNotMax(m model.InFlight) *FloorNotMax {
	return &FloorNotMax{inFlightCounts{m: m}}
}

func (b *FloorNotMax) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	limit := b.m.MinConcurrency + b.m.PPM*b.calls/1_000_000 // BUG: + where the rule takes max
	if b.retries >= limit {
		return false
	}
	b.retries++
	return true
}

func (b *FloorNotMax) Success(budget.Kind) {}

func (b *FloorNotMax) AttemptEnd(k budget.Kind) {
	if !k.IsRetry() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseRetry()
}

// UnlockedCallEnd guards its counts with a mutex in every method but
// CallEnd, which decrements the calls in flight with a plain read and
// write. A CallEnd that runs beside a Request or another CallEnd loses one
// of the two updates, so the count of calls drifts from the calls in
// flight, and the race detector reports the unsynchronized access.
//
// Bug class: a lock forgotten on one method, a data race. It comes from a
// method added later than the others (CallEnd arrived with the in-flight
// interface), written as "just a decrement", or from a release moved into a
// deferred function that was not given the lock.
type UnlockedCallEnd struct{ inFlightCounts }

var _ budget.InFlightBudget = (*UnlockedCallEnd)(nil)

// NewUnlockedCallEnd returns an UnlockedCallEnd for m with nothing in flight.
func NewUnlockedCallEnd(m model.InFlight) *UnlockedCallEnd {
	return &UnlockedCallEnd{inFlightCounts{m: m}}
}

func (b *UnlockedCallEnd) Success(budget.Kind) {}

func (b *UnlockedCallEnd) AttemptEnd(k budget.Kind) {
	if !k.IsRetry() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseRetry()
}

func (b *UnlockedCallEnd) CallEnd() {
	if b.calls > 0 { // BUG: no lock around the read ...
		b.calls-- // ... and the write
	}
}

// StaleLimit caches the limit, max(MinConcurrency, ⌊PPM × calls / 1e6⌋), and
// recomputes it when a call starts but not when one ends. After a surge of
// calls the limit stays where the surge put it while the calls drain, so
// the budget grants retries against calls that have ended: a burst of
// failures right after the peak, the retry storm the budget is for, gets
// the peak's allowance. It recovers at the next Request, which is why the
// bug survives a test that keeps a steady load.
//
// Bug class: a derived value cached and not invalidated on every path that
// changes its input. It comes from moving the limit's computation out of
// the hot Retry path, to where the count of calls is updated, and missing
// the decrement.
type StaleLimit struct {
	inFlightCounts
	limit int64
}

var _ budget.InFlightBudget = (*StaleLimit)(nil)

// NewStaleLimit returns a StaleLimit for m with nothing in flight.
func NewStaleLimit(m model.InFlight) *StaleLimit {
	return &StaleLimit{inFlightCounts: inFlightCounts{m: m}, limit: envoyLimit(m, 0)}
}

func (b *StaleLimit) Request() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	b.limit = envoyLimit(b.m, b.calls)
}

func (b *StaleLimit) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retries >= b.limit {
		return false
	}
	b.retries++
	return true
}

func (b *StaleLimit) Success(budget.Kind) {}

func (b *StaleLimit) AttemptEnd(k budget.Kind) {
	if !k.IsRetry() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseRetry()
}

func (b *StaleLimit) CallEnd() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls > 0 {
		b.calls-- // BUG: b.limit is not recomputed
	}
}

// ProductOverflow32 keeps its counts and its share in uint32, as Envoy's
// gauges are, and computes the ratio's share of the calls in flight as
// PPM × calls / 1e6 in 32 bits. The product wraps once the calls in flight
// pass 2^32 / PPM (21,475 with Envoy's 20%), and the limit falls back to
// about MinConcurrency: at the very load where the ratio matters most the
// budget all but stops retrying, and it recovers as the load falls.
//
// Bug class: an intermediate product overflowing a narrow integer type. It
// comes from a port that keeps the counters' width for the arithmetic on
// them, or from computing in parts per million to avoid floating point
// without widening first.
type ProductOverflow32 struct {
	mu      sync.Mutex
	ppm     uint32
	min     uint32
	calls   uint32
	retries uint32
}

var _ budget.InFlightBudget = (*ProductOverflow32)(nil)

// NewProductOverflow32 returns a ProductOverflow32 for m with nothing in
// flight. m.MinConcurrency must fit in 32 bits, as the model requires.
func NewProductOverflow32(m model.InFlight) *ProductOverflow32 {
	return &ProductOverflow32{ppm: uint32(m.PPM), min: uint32(m.MinConcurrency)}
}

func (b *ProductOverflow32) Request() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls < 1<<32-1 {
		b.calls++
	}
}

func (b *ProductOverflow32) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	limit := max(b.min, b.ppm*b.calls/1_000_000) // BUG: the product wraps in 32 bits
	if b.retries >= limit || b.retries == 1<<32-1 {
		return false
	}
	b.retries++
	return true
}

func (b *ProductOverflow32) Success(budget.Kind) {}

func (b *ProductOverflow32) AttemptEnd(k budget.Kind) {
	if !k.IsRetry() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retries > 0 {
		b.retries--
	}
}

func (b *ProductOverflow32) CallEnd() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls > 0 {
		b.calls--
	}
}

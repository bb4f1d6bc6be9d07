package mutants

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// CheckThenAct is a token bucket that checks the balance with one atomic
// operation and withdraws with another: Load, compare, then Add. Every
// access is atomic, so the race detector stays silent, yet two retries that
// both load a balance covering one of them are both granted, and the
// balance goes negative. It supports no refill.
//
// Seen in: the retry budgets of tower (Rust), failsafe-go and Envoy all read
// the balance and update it in two steps; a Go port with sync/atomic gets
// exactly this. Caught by the linearizability check; go test -race passes.
type CheckThenAct struct {
	m      model.TokenBucket
	tokens atomic.Int64
}

var _ budget.Budget = (*CheckThenAct)(nil)

// NewCheckThenAct returns a full CheckThenAct for m, which must have no
// refill.
func NewCheckThenAct(m model.TokenBucket) *CheckThenAct {
	b := &CheckThenAct{m: m}
	b.tokens.Store(m.Capacity)
	return b
}

func (b *CheckThenAct) Request() {}

func (b *CheckThenAct) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	c := bucketCost(b.m, k)
	if b.tokens.Load() < c { // check ...
		return false
	}
	b.tokens.Add(-c) // ... then act: BUG, another retry may have withdrawn in between
	return true
}

func (b *CheckThenAct) Success(k budget.Kind) {
	credit := b.m.SuccessBonus
	if k.IsRetry() && !b.m.NoRefund {
		credit = bucketCost(b.m, k)
	}
	for {
		t := b.tokens.Load()
		n := min(t+credit, b.m.Capacity)
		if n == t || b.tokens.CompareAndSwap(t, n) {
			return
		}
	}
}

// MissingLock is a token bucket with no synchronization at all: plain
// reads and writes of one int64 from every goroutine. Concurrent updates are
// lost, and the race detector reports the first pair it sees. It supports no
// refill. Run it only in a child process: under -race it fails whatever test
// runs it.
//
// Seen in: the article "Retry budgets by language: Python, Go, and JavaScript" names forgetting the lock as the trap of Python budgets
// under threads; in Go it is a budget written for one goroutine and then
// shared. Caught by the race detector (go test -race) and, through lost
// updates, by the linearizability check.
type MissingLock struct {
	m      model.TokenBucket
	tokens int64
}

var _ budget.Budget = (*MissingLock)(nil)

// NewMissingLock returns a full MissingLock for m, which must have no refill.
func NewMissingLock(m model.TokenBucket) *MissingLock {
	return &MissingLock{m: m, tokens: m.Capacity}
}

func (b *MissingLock) Request() {}

func (b *MissingLock) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	c := bucketCost(b.m, k)
	if b.tokens < c { // BUG: no lock around the read ...
		return false
	}
	b.tokens -= c // ... and the write
	return true
}

func (b *MissingLock) Success(k budget.Kind) {
	credit := b.m.SuccessBonus
	if k.IsRetry() && !b.m.NoRefund {
		credit = bucketCost(b.m, k)
	}
	b.tokens = min(b.tokens+credit, b.m.Capacity) // BUG: unsynchronized
}

// modelBucket is a token bucket that keeps the model's own state under a
// mutex and steps it: correct by construction, unless a mutant changes how
// it handles the clock or which operation it steps.
type modelBucket struct {
	mu    sync.Mutex
	m     model.TokenBucket
	clock budget.Clock
	state model.TokenBucketState
}

func (b *modelBucket) step(op model.Op) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state.Clock.Now = b.clock.Now()
	var granted bool
	b.state, granted = b.m.Step(b.state, op)
	return granted
}

// WrongKindRefund is a token bucket whose successful retry refunds the cost
// of a transient retry whatever the retry's kind was. A throttled retry
// (cost 5) that succeeds is refunded 14, so a stream of throttled retries
// that succeed grows the balance instead of leaving it unchanged.
//
// Bug class: a refund computed from a constant or from the wrong variable
// rather than from the kind of the retry that succeeded. Caught by the
// sequential check.
type WrongKindRefund struct{ b modelBucket }

var _ budget.Budget = (*WrongKindRefund)(nil)

// NewWrongKindRefund returns a full WrongKindRefund for m on clock, which
// must read 0.
func NewWrongKindRefund(m model.TokenBucket, clock budget.Clock) *WrongKindRefund {
	return &WrongKindRefund{modelBucket{m: m, clock: clock, state: m.Init()}}
}

func (w *WrongKindRefund) Request() {}
func (w *WrongKindRefund) Retry(k budget.Kind) bool {
	return w.b.step(model.OpRetry(model.Kind(k)))
}
func (w *WrongKindRefund) Success(k budget.Kind) {
	if k == budget.Throttled {
		k = budget.Transient // BUG: refunds the transient cost for a throttled retry
	}
	w.b.step(model.OpSuccess(model.Kind(k)))
}

// DoubleRefill is a refilling token bucket that reads the clock before it
// takes its lock and then trusts the reading: the time since the last
// refill is added, and the reading becomes the last refill time, even when
// another goroutine has meanwhile refilled up to a later instant. The next
// refill then pays for the same interval a second time.
//
// Seen in: the lazy-refill pattern `now := time.Now(); mu.Lock(); elapsed :=
// now.Sub(last); last = now`, an easy step away from the correct one, which
// reads the clock under the lock or keeps the later of the two instants.
// Caught by the sequential check, whose clock goes backwards, and by the
// linearizability check in most runs.
type DoubleRefill struct{ b modelBucket }

var _ budget.Budget = (*DoubleRefill)(nil)

// NewDoubleRefill returns a full DoubleRefill for m on clock, which must
// read 0. m should have a refill rate, or there is nothing to refill twice.
func NewDoubleRefill(m model.TokenBucket, clock budget.Clock) *DoubleRefill {
	return &DoubleRefill{modelBucket{m: m, clock: clock, state: m.Init()}}
}

func (d *DoubleRefill) step(op model.Op) bool {
	now := d.b.clock.Now() // BUG: read outside the lock ...
	d.b.mu.Lock()
	defer d.b.mu.Unlock()
	s := d.b.state
	s.Clock.Now = now
	if now < s.Clock.Seen {
		s.Clock.Seen = now // ... and trusted: the last refill time moves back
	}
	var granted bool
	d.b.state, granted = d.b.m.Step(s, op)
	return granted
}

func (d *DoubleRefill) Request() {}
func (d *DoubleRefill) Retry(k budget.Kind) bool {
	return d.step(model.OpRetry(model.Kind(k)))
}
func (d *DoubleRefill) Success(k budget.Kind) {
	d.step(model.OpSuccess(model.Kind(k)))
}

// Available returns the balance in tokens, as budgets that report one do.
func (b *CheckThenAct) Available() float64 { return float64(b.tokens.Load()) / 1000 }

// PerCallSite is what a shared budget becomes when it is built inside the
// handler instead of once per dependency: every call starts from a fresh,
// full bucket, so N concurrent calls have N caps, and under an outage every
// call retries as if no budget existed.
//
// Seen in: the first trap of the article "Retry budgets by language: Python, Go, and JavaScript", "if every call site owns its own counter,
// you don't have a budget — you have N caps that multiply"; a decorator that
// constructs its limiter per wrapped function. Caught by the amplification
// check.
type PerCallSite struct {
	mu  sync.Mutex
	m   model.TokenBucket
	cur *modelBucket
}

var _ budget.Budget = (*PerCallSite)(nil)

// NewPerCallSite returns a PerCallSite for m on clock.
func NewPerCallSite(m model.TokenBucket, clock budget.Clock) *PerCallSite {
	p := &PerCallSite{m: m}
	p.cur = &modelBucket{m: m, clock: clock, state: m.Init()}
	return p
}

func (p *PerCallSite) bucket() *modelBucket {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// Request starts a call, and with it a new bucket: the bug.
func (p *PerCallSite) Request() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur = &modelBucket{m: p.m, clock: p.cur.clock, state: p.m.Init()} // BUG: a fresh budget per call
}

func (p *PerCallSite) Retry(k budget.Kind) bool {
	return p.bucket().step(model.OpRetry(model.Kind(k)))
}

func (p *PerCallSite) Success(k budget.Kind) { p.bucket().step(model.OpSuccess(model.Kind(k))) }

// RefundAlways is a token bucket whose retry token is given back whatever
// the retry's outcome: the release that should refund only a successful
// retry runs on failures too, so a granted retry costs nothing and the
// bucket never drains, however long the outage.
//
// Seen in: the AWS SDK guards its release with "if err != nil { return nil
// }"; dropping that guard, or releasing in a defer, gives this bug. Caught
// by the amplification check (and by the sequential one).
type RefundAlways struct{ b modelBucket }

var _ budget.Budget = (*RefundAlways)(nil)

// NewRefundAlways returns a full RefundAlways for m on clock.
func NewRefundAlways(m model.TokenBucket, clock budget.Clock) *RefundAlways {
	return &RefundAlways{modelBucket{m: m, clock: clock, state: m.Init()}}
}

func (r *RefundAlways) Request() {}
func (r *RefundAlways) Retry(k budget.Kind) bool {
	if !r.b.step(model.OpRetry(model.Kind(k))) {
		return false
	}
	r.b.step(model.OpSuccess(model.Kind(k))) // BUG: refunded before the retry has even run
	return true
}
func (r *RefundAlways) Success(k budget.Kind) {
	if !k.IsRetry() {
		r.b.step(model.OpSuccess(model.Kind(k)))
	}
}

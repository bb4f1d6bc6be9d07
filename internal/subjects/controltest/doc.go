// Package controltest holds budgets written the way the budgetcheck
// command's rewrite leaves them (every atomic operation and lock through
// package yield), and the tests that put them through the suite's
// controlled runs. It is a package of its own because instrumented code,
// once linked in, puts every Linearizable check of the test binary under
// control.
package controltest

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/yield"
)

var _ = yield.Hook.Mark()

func cost(m model.TokenBucket, k budget.Kind) int64 {
	if k == budget.Throttled {
		return m.ThrottledCost
	}
	return m.TransientCost
}

func credit(m model.TokenBucket, k budget.Kind) int64 {
	if k.IsRetry() && !m.NoRefund {
		return cost(m, k)
	}
	return m.SuccessBonus
}

// refund credits a success to tokens, up to the capacity, in a
// compare-and-swap loop.
func refund(tokens *atomic.Int64, m model.TokenBucket, k budget.Kind) {
	c := credit(m, k)
	for {
		t := yield.P(tokens).Load()
		n := min(t+c, m.Capacity)
		if n == t || yield.P(tokens).CompareAndSwap(t, n) {
			return
		}
	}
}

// CheckThenAct loads the balance, compares, then adds: two retries that
// both load a balance covering one are both granted.
type CheckThenAct struct {
	m      model.TokenBucket
	tokens atomic.Int64
}

// NewCheckThenAct returns a full CheckThenAct for m, which has no refill.
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
	c := cost(b.m, k)
	if yield.P(&b.tokens).Load() < c {
		return false
	}
	yield.P(&b.tokens).Add(-c)
	return true
}

func (b *CheckThenAct) Success(k budget.Kind) { refund(&b.tokens, b.m, k) }

// CAS is the correct version: every update is one compare-and-swap.
type CAS struct {
	m      model.TokenBucket
	tokens atomic.Int64
}

// NewCAS returns a full CAS for m, which has no refill.
func NewCAS(m model.TokenBucket) *CAS {
	b := &CAS{m: m}
	b.tokens.Store(m.Capacity)
	return b
}

func (b *CAS) Request() {}

func (b *CAS) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	c := cost(b.m, k)
	for {
		t := yield.P(&b.tokens).Load()
		if t < c {
			return false
		}
		if yield.P(&b.tokens).CompareAndSwap(t, t-c) {
			return true
		}
	}
}

func (b *CAS) Success(k budget.Kind) { refund(&b.tokens, b.m, k) }

// Locked is the correct version behind a mutex, with the balance read and
// written in two steps inside it.
type Locked struct {
	m      model.TokenBucket
	mu     sync.Mutex
	tokens atomic.Int64
}

// NewLocked returns a full Locked for m, which has no refill.
func NewLocked(m model.TokenBucket) *Locked {
	b := &Locked{m: m}
	b.tokens.Store(m.Capacity)
	return b
}

func (b *Locked) Request() {}

func (b *Locked) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	yield.Hook.M(&b.mu).Lock()
	defer yield.Hook.M(&b.mu).Unlock()
	c := cost(b.m, k)
	if yield.P(&b.tokens).Load() < c {
		return false
	}
	yield.P(&b.tokens).Add(-c)
	return true
}

func (b *Locked) Success(k budget.Kind) {
	yield.Hook.M(&b.mu).Lock()
	defer yield.Hook.M(&b.mu).Unlock()
	t := yield.P(&b.tokens).Load()
	yield.P(&b.tokens).Store(min(t+credit(b.m, k), b.m.Capacity))
}

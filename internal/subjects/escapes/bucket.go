package escapes

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

const nsPerSecond = uint64(time.Second)

// tokens is the balance of a model.TokenBucket in milli-tokens, with the
// refill's fraction of a milli-token in units of 1e-9. It knows nothing of
// time: callers tell it how many nanoseconds have passed. Not safe for
// concurrent use.
type tokens struct {
	m      model.TokenBucket
	tokens int64
	frac   int64
}

func newTokens(m model.TokenBucket) tokens {
	if err := m.Validate(); err != nil {
		panic(fmt.Sprintf("escapes: %v", err))
	}
	return tokens{m: m, tokens: m.Capacity}
}

func (t *tokens) cost(k budget.Kind) int64 {
	if k == budget.Throttled {
		return t.m.ThrottledCost
	}
	return t.m.TransientCost
}

// earn adds what elapsed nanoseconds of refill earn, carrying the fraction;
// a bucket that fills carries none.
func (t *tokens) earn(elapsed uint64) {
	if t.m.RefillPerSecond <= 0 || elapsed == 0 {
		return
	}
	hi, lo := bits.Mul64(elapsed, uint64(t.m.RefillPerSecond))
	lo, carry := bits.Add64(lo, uint64(t.frac), 0)
	hi += carry
	need := uint64(t.m.Capacity-t.tokens) * nsPerSecond
	if hi > 0 || lo >= need {
		t.tokens, t.frac = t.m.Capacity, 0
		return
	}
	t.tokens += int64(lo / nsPerSecond)
	t.frac = int64(lo % nsPerSecond)
}

// take withdraws the cost of a retry of kind k (a retry kind) if the
// balance covers it.
func (t *tokens) take(k budget.Kind) bool {
	c := t.cost(k)
	if t.tokens < c {
		return false
	}
	t.tokens -= c
	return true
}

// deposit credits a success of kind k, up to Capacity.
func (t *tokens) deposit(k budget.Kind) {
	credit := t.m.SuccessBonus
	if k.IsRetry() && !t.m.NoRefund {
		credit = t.cost(k)
	}
	t.tokens += credit
	if t.tokens >= t.m.Capacity {
		t.tokens, t.frac = t.m.Capacity, 0
	}
}

// full reports whether the bucket is full; a full bucket carries no
// fraction, so it is then exactly as a new one.
func (t *tokens) full() bool { return t.tokens == t.m.Capacity }

// forward is the forward-only rule on an int64 clock: a reading earlier
// than the latest one seen counts as that one.
type forward struct {
	clock budget.Clock
	last  time.Duration
}

func newForward(clock budget.Clock) forward {
	if clock == nil {
		panic("escapes: nil clock")
	}
	return forward{clock: clock, last: clock.Now()}
}

// observe reads the clock and returns the nanoseconds from the latest
// reading seen to it, 0 if it is not later. The unsigned difference is the
// true distance even where the int64 one overflows.
func (f *forward) observe() uint64 {
	now := f.clock.Now()
	if now <= f.last {
		return 0
	}
	d := uint64(now) - uint64(f.last)
	f.last = now
	return d
}

// floorDiv returns a / b rounded towards negative infinity; b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// floorMod returns a mod b in [0, b); b > 0.
func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

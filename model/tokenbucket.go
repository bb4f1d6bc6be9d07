package model

import (
	"math/bits"
	"time"
)

// TokenBucket specifies a token-bucket retry budget. Quantities are in
// milli-tokens (1 token = 1000).
//
// The bucket starts full. Retry(k) for a retry kind withdraws the cost of k
// when the balance covers it, and is granted; otherwise it is denied and
// changes nothing. Success(k) deposits the cost of k when k is a retry kind
// (unless NoRefund), and SuccessBonus otherwise. With RefillPerSecond > 0
// the balance also grows by RefillPerSecond for every second the clock moves
// forward; the part below one milli-token is carried, so time counts the
// same whether it passes in one step or in many. The balance never exceeds
// Capacity, and a full bucket carries no fraction. Request changes nothing.
//
// Only a Retry of a retry kind and a Success observe the clock (a Retry of
// another kind is denied and changes nothing), and only when
// RefillPerSecond is positive; without refill the state does not track
// time at all.
type TokenBucket struct {
	Capacity        int64
	TransientCost   int64
	ThrottledCost   int64
	SuccessBonus    int64
	RefillPerSecond int64
	NoRefund        bool
}

// TokenBucketState is the state of a TokenBucket.
type TokenBucketState struct {
	Tokens int64 // milli-tokens
	Frac   int64 // the part of a milli-token refilled so far, in units of 1e-9
	Clock  Clock
}

var _ Model[TokenBucketState] = TokenBucket{}

// AWS returns the AWS SDK for Go v2 (v1.48.0) retry quota: 500 tokens, 14 per
// transient retry, 5 per throttled retry, 1 per successful first attempt.
func AWS() TokenBucket {
	return TokenBucket{Capacity: 500_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
}

// Init returns a full bucket.
func (m TokenBucket) Init() TokenBucketState {
	return TokenBucketState{Tokens: m.Capacity}
}

func (m TokenBucket) cost(k Kind) int64 {
	if k == Throttled {
		return m.ThrottledCost
	}
	return m.TransientCost
}

// Step applies op.
func (m TokenBucket) Step(s TokenBucketState, op Op) (TokenBucketState, bool) {
	switch op.Op {
	case Reset:
		return m.ResetState(s), false
	case Advance:
		if m.RefillPerSecond > 0 { // without refill, time changes nothing
			s.Clock = s.Clock.Advance(op.D)
		}
	case Retry:
		if !op.Kind.IsRetry() {
			return s, false
		}
		s = m.refill(s)
		c := m.cost(op.Kind)
		if s.Tokens < c {
			return s, false
		}
		s.Tokens -= c
		return s, true
	case Success:
		s = m.refill(s)
		credit := m.SuccessBonus
		if op.Kind.IsRetry() && !m.NoRefund {
			credit = m.cost(op.Kind)
		}
		s.Tokens += credit
		if s.Tokens >= m.Capacity {
			s.Tokens, s.Frac = m.Capacity, 0
		}
	}
	return s, false
}

// refill observes the clock and adds what the time since the latest reading
// seen has earned.
func (m TokenBucket) refill(s TokenBucketState) TokenBucketState {
	if m.RefillPerSecond == 0 {
		return s
	}
	from := s.Clock.Seen
	s.Clock = s.Clock.Observe()
	elapsed := uint64(s.Clock.Seen - from) // >= 0 by observe; the true distance even if the int64 difference overflows
	// earned = Frac + elapsed*RefillPerSecond, in 128 bits.
	hi, lo := bits.Mul64(elapsed, uint64(m.RefillPerSecond))
	lo, carry := bits.Add64(lo, uint64(s.Frac), 0)
	hi += carry
	need := uint64(m.Capacity-s.Tokens) * uint64(time.Second)
	if hi > 0 || lo >= need {
		s.Tokens, s.Frac = m.Capacity, 0
		return s
	}
	s.Tokens += int64(lo / uint64(time.Second))
	s.Frac = int64(lo % uint64(time.Second))
	return s
}

// Balance returns the balance of s as of its clock's reading, in
// milli-tokens: what an observation now would find. It changes nothing.
func (m TokenBucket) Balance(s TokenBucketState) int64 { return m.refill(s).Tokens }

// Equal reports a == b.
func (m TokenBucket) Equal(a, b TokenBucketState) bool { return a == b }

// Hash hashes s.
func (m TokenBucket) Hash(s TokenBucketState) uint64 {
	return Hash(s.Tokens, s.Frac, int64(s.Clock.Now), int64(s.Clock.Seen))
}

// DescribeState describes s as "tokens=486 now=1.2s".
func (m TokenBucket) DescribeState(s TokenBucketState) string {
	d := "tokens=" + formatMilli(s.Tokens)
	if m.RefillPerSecond > 0 {
		d += " " + s.Clock.String()
	}
	return d
}

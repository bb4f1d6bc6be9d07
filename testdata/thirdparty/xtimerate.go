package thirdparty

import (
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// XTimeRate adapts golang.org/x/time/rate's Limiter to budget.Budget the
// way a team would: a retry of a retry kind takes one token with Allow(),
// which reads time.Now itself; Request and Success tell the limiter
// nothing (it counts neither requests nor successes).
type XTimeRate struct{ Lim *rate.Limiter }

var _ budget.Budget = XTimeRate{}

// NewXTimeRate returns the limiter the subject puts through the suite:
// 10 tokens a second, a burst of 10, full at construction.
func NewXTimeRate() XTimeRate { return XTimeRate{Lim: rate.NewLimiter(10, 10)} }

// Request does nothing: x/time/rate does not count first attempts.
func (XTimeRate) Request() {}

// Retry takes one token for a transient or throttled retry, with Allow();
// any other kind is denied without asking the limiter.
func (a XTimeRate) Retry(k budget.Kind) bool { return k.IsRetry() && a.Lim.Allow() }

// Success does nothing: x/time/rate gives nothing back for a success.
func (XTimeRate) Success(budget.Kind) {}

// XTimeRateModel is the rule rate.NewLimiter(10, 10) documents ("a token
// bucket of size b, initially full and refilled at rate r tokens per
// second"), in milli-tokens: 10 tokens, 1 a retry of either kind, 10
// tokens a second, and nothing back for a success.
var XTimeRateModel = model.TokenBucket{
	Capacity:        10_000,
	TransientCost:   1_000,
	ThrottledCost:   1_000,
	RefillPerSecond: 10_000,
	NoRefund:        true,
}

// XTimeFloatModel is x/time/rate's own arithmetic for a Limiter built
// with NewLimiter(Limit, Burst) and asked with Allow(), one call at a
// time, as a model: float64 tokens, the refill d.Seconds() × limit
// (tokensFromDuration), the balance capped at the burst (advance), and a
// grant when the wait for the missing part of a token, truncated to a
// nanosecond, is zero (reserveN with maxFutureReserve 0, durationFromTokens).
// It differs from XTimeRateModel only in rounding: it grants where the
// deficit is worth less than a nanosecond of refill, and it adds in
// float64 (see TestXTimeRateRounding).
//
// The clock follows model.Clock.Observe: a reading behind the latest one
// seen counts as the latest, so nothing is refilled twice. That is what
// x/time/rate does one call at a time (advance treats t before last as
// last, and reserveN only ever stores an instant it was given, on a
// grant), and what it fails to do when calls overlap: its point is to
// let the suite's Linearizable check see x/time's concurrency bug alone,
// without the rounding in the way (see xTimeFloatSubject in
// subjects_test.go).
type XTimeFloatModel struct {
	Limit float64 // tokens a second, > 0
	Burst int     // > 0
}

// XTimeFloatState is a state of XTimeFloatModel: the Limiter's tokens and
// last (as a reading of the model's clock).
type XTimeFloatState struct {
	Tokens float64
	Last   time.Duration
	Clock  model.Clock
}

var (
	_ model.Model[XTimeFloatState] = XTimeFloatModel{}
	_ model.Timed                  = XTimeFloatModel{}
	_ model.Validator              = XTimeFloatModel{}
)

// Validate accepts a positive limit and burst.
func (m XTimeFloatModel) Validate() error {
	if !(m.Limit > 0 && m.Limit < 1e9) || m.Burst <= 0 || m.Burst > 1<<20 {
		return fmt.Errorf("%w: XTimeFloatModel needs a limit in (0, 1e9) and a burst in [1, 2^20], got %v and %d", model.ErrInvalid, m.Limit, m.Burst)
	}
	return nil
}

// Timing returns the time one token takes and the time the burst takes.
func (m XTimeFloatModel) Timing() (scale, horizon time.Duration) {
	scale = max(time.Duration(float64(time.Second)/m.Limit), 1)
	return scale, scale * time.Duration(m.Burst)
}

// Init returns a full limiter.
func (m XTimeFloatModel) Init() XTimeFloatState {
	return XTimeFloatState{Tokens: float64(m.Burst)}
}

// Step applies op: Allow() for a Retry of a retry kind, nothing else.
func (m XTimeFloatModel) Step(s XTimeFloatState, op model.Op) (XTimeFloatState, bool) {
	switch op.Op {
	case model.Advance:
		s.Clock = s.Clock.Advance(op.D)
	case model.Retry:
		if !op.Kind.IsRetry() {
			return s, false
		}
		s.Clock = s.Clock.Observe()
		t := s.Clock.Seen
		// advance
		last := s.Last
		if t < last {
			last = t
		}
		tokens := s.Tokens + (t-last).Seconds()*m.Limit
		if b := float64(m.Burst); tokens > b {
			tokens = b
		}
		// reserveN(t, 1, 0)
		tokens--
		var wait time.Duration
		if tokens < 0 {
			d := (-tokens / m.Limit) * float64(time.Second)
			if d > float64(math.MaxInt64) {
				wait = math.MaxInt64
			} else {
				wait = time.Duration(d)
			}
		}
		if wait > 0 {
			return s, false
		}
		s.Tokens, s.Last = tokens, t
		return s, true
	}
	return s, false
}

// Equal reports a == b.
func (m XTimeFloatModel) Equal(a, b XTimeFloatState) bool { return a == b }

// Hash hashes s.
func (m XTimeFloatModel) Hash(s XTimeFloatState) uint64 {
	return model.Hash(int64(math.Float64bits(s.Tokens)), int64(s.Last), int64(s.Clock.Now), int64(s.Clock.Seen))
}

// DescribeState describes s as "tokens=0.99999999 last=100ms now=100ms".
func (m XTimeFloatModel) DescribeState(s XTimeFloatState) string {
	return fmt.Sprintf("tokens=%v last=%v %v", s.Tokens, s.Last, s.Clock)
}

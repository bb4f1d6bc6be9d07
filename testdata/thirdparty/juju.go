package thirdparty

import (
	"fmt"
	"math"
	"time"

	"github.com/juju/ratelimit"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// jujuClock is a ratelimit.Clock over the suite's budget.Clock: a reading
// d is the instant d after the Unix epoch. Sleep is never called: the
// adapter only uses TakeAvailable, which does not wait.
type jujuClock struct{ c budget.Clock }

func (j jujuClock) Now() time.Time { return time.Unix(0, 0).Add(j.c.Now()) }

func (jujuClock) Sleep(time.Duration) {
	panic("thirdparty: juju's Sleep called, but TakeAvailable never waits")
}

// Juju adapts github.com/juju/ratelimit's Bucket to budget.Budget: a retry
// of a retry kind takes one token with TakeAvailable(1), which reads the
// bucket's clock under the bucket's mutex; Request and Success tell the
// bucket nothing.
//
// It has no Available() float64 on purpose: juju's Available() is not a
// read, it runs adjustavailableTokens, which moves latestTick to the tick
// of the reading. With a clock that goes back, that changes what later
// calls answer (a full bucket whose latestTick moved forward loses tokens
// on a step back that would have left a bucket never asked at full), so
// the balance comparison after every operation would itself change the
// budget under test.
type Juju struct{ B *ratelimit.Bucket }

var _ budget.Budget = Juju{}

// NewJuju builds the bucket of m on clock: capacity m.Capacity, full at
// construction, m.Quantum tokens at each tick of m.FillInterval counted
// from the clock's reading at construction.
func NewJuju(m JujuModel, clock budget.Clock) Juju {
	return Juju{B: ratelimit.NewBucketWithQuantumAndClock(m.FillInterval, m.Capacity, m.Quantum, jujuClock{clock})}
}

// Request does nothing: juju's bucket does not count first attempts.
func (Juju) Request() {}

// Retry takes one token for a transient or throttled retry; any other kind
// is denied without asking the bucket.
func (a Juju) Retry(k budget.Kind) bool { return k.IsRetry() && a.B.TakeAvailable(1) == 1 }

// Success does nothing: juju gives nothing back for a success.
func (Juju) Success(budget.Kind) {}

// JujuModel is the rule of juju/ratelimit v1.0.2's Bucket as
// NewBucketWithQuantumAndClock(FillInterval, Capacity, Quantum, clock)
// builds it and TakeAvailable(1) uses it, for every sequence of clock
// readings, backwards ones included. juju documents it in ratelimit.go
// (the comment above type Bucket): "Time is measured in equal measured
// ticks, a given interval (fillInterval) apart. On each tick a number of
// tokens (quantum) are added to the bucket", ticks counted "from the start
// time", the bucket "initially full".
//
// The rule, for a Retry of a retry kind at clock reading now:
//
//   - tick = (now − start) / FillInterval, where start is the reading at
//     construction, the distance saturates at ±(2^63 − 1) ns as
//     time.Time.Sub does (the adapter's clock maps reading d to the
//     instant d after the epoch, so the distance is exact until it
//     saturates), and the division truncates toward zero, as Go's does:
//     currentTick.
//   - if the bucket is not full, tokens += (tick − latestTick) × Quantum,
//     capped at Capacity, in int64 arithmetic; latestTick = tick either
//     way: adjustavailableTokens.
//   - the retry is granted, and takes one token, when tokens > 0:
//     takeAvailable.
//
// The clock going back. adjustavailableTokens documents that its tick
// "must be in the future (positive) with respect to tb.latestTick", and
// does not check it: a reading whose tick is below latestTick takes
// (latestTick − tick) × Quantum tokens out of a bucket that is not full
// (the balance may go negative, and every retry is denied until it is
// positive again), so the balance follows the clock back and forth; a
// full bucket loses nothing and only moves latestTick back, so those
// ticks are paid again when the clock comes forward (with TakeAvailable,
// a bucket is full at the next call only when it was never asked). This
// is not the forward-only rule that budget.Clock's documentation asks of
// budgets (an instant earlier than the latest seen counts as the latest,
// so nothing is refilled twice) and model.Clock.Observe states. juju
// never needs it with its own clock (time.Now, monotonic, read under the
// bucket's mutex), but on a clock that steps back, as the suite's
// ManualClock does, it denies retries the forward-only rule grants, and
// pays a new bucket's ticks twice (TestJujuClockBack pins both). The
// model says exactly what juju does, so the suite's checks, Edges
// included, compare juju with juju's own rule; the alternative,
// WallClock, would never step back, and would skip Edges.
//
// Request and Success change nothing; a Retry of another kind is denied and
// changes nothing, without reading the clock.
type JujuModel struct {
	FillInterval time.Duration // > 0
	Capacity     int64         // > 0
	Quantum      int64         // > 0
}

// JujuState is a state of JujuModel. Tokens and LatestTick are juju's
// availableTokens and latestTick; Start is the clock's reading at
// construction; only Clock.Now is used (Seen stays at Start).
//
// A full bucket's LatestTick never changes an answer (the next Retry
// overwrites it before any arithmetic uses it), but the model keeps juju's
// value anyway: Step never leaves a bucket full after a Retry (a full
// bucket always grants), so only Init's states are full, with LatestTick 0.
type JujuState struct {
	Tokens     int64
	LatestTick int64
	Start      time.Duration
	Clock      model.Clock
}

var (
	_ model.Model[JujuState]   = JujuModel{}
	_ model.Validator          = JujuModel{}
	_ model.Timed              = JujuModel{}
	_ model.Starter[JujuState] = JujuModel{}
	// Not model.Balanced: see Juju. Not model.Resetter: a juju bucket
	// lives in memory.
)

// Validate accepts the parameters juju's constructor accepts (it panics on
// the others), with a capacity and quantum small enough that a tick
// difference times the quantum stays far from int64 overflow.
func (m JujuModel) Validate() error {
	switch {
	case m.FillInterval <= 0:
		return fmt.Errorf("%w: JujuModel.FillInterval must be positive, got %v", model.ErrInvalid, m.FillInterval)
	case m.Capacity <= 0 || m.Capacity > 1<<20:
		return fmt.Errorf("%w: JujuModel.Capacity must be in [1, 2^20], got %d", model.ErrInvalid, m.Capacity)
	case m.Quantum <= 0 || m.Quantum > 1<<20:
		return fmt.Errorf("%w: JujuModel.Quantum must be in [1, 2^20], got %d", model.ErrInvalid, m.Quantum)
	}
	return nil
}

// Timing returns the tick, around whose boundaries answers change, and
// the time an empty bucket takes to fill: ⌈Capacity/Quantum⌉ ticks.
func (m JujuModel) Timing() (scale, horizon time.Duration) {
	ticks := (m.Capacity + m.Quantum - 1) / m.Quantum
	return min(m.FillInterval, model.MaxTiming), min(m.FillInterval*time.Duration(ticks), model.MaxTiming)
}

// Init returns a full bucket built on a clock reading 0.
func (m JujuModel) Init() JujuState { return m.InitAt(0) }

// InitAt returns a full bucket built on a clock reading now: its ticks
// count from now.
func (m JujuModel) InitAt(now time.Duration) JujuState {
	return JujuState{Tokens: m.Capacity, Start: now, Clock: model.Clock{Now: now, Seen: now}}
}

// tick is juju's currentTick for the reading now.
func (m JujuModel) tick(s JujuState, now time.Duration) int64 {
	d := int64(now) - int64(s.Start)
	// time.Time.Sub saturates where the int64 difference overflows.
	switch {
	case now >= 0 && s.Start < 0 && d < 0:
		d = math.MaxInt64
	case now < 0 && s.Start >= 0 && d >= 0:
		d = math.MinInt64
	}
	return d / int64(m.FillInterval)
}

// Step applies op to s.
func (m JujuModel) Step(s JujuState, op model.Op) (JujuState, bool) {
	switch op.Op {
	case model.Advance:
		s.Clock = s.Clock.Advance(op.D)
	case model.Retry:
		if !op.Kind.IsRetry() {
			return s, false
		}
		tick := m.tick(s, s.Clock.Now)
		last := s.LatestTick
		s.LatestTick = tick
		if s.Tokens < m.Capacity {
			s.Tokens += (tick - last) * m.Quantum
			if s.Tokens > m.Capacity {
				s.Tokens = m.Capacity
			}
		}
		if s.Tokens <= 0 {
			return s, false
		}
		s.Tokens--
		return s, true
	}
	return s, false
}

// Equal reports a == b.
func (m JujuModel) Equal(a, b JujuState) bool { return a == b }

// Hash hashes s.
func (m JujuModel) Hash(s JujuState) uint64 {
	return model.Hash(s.Tokens, s.LatestTick, int64(s.Start), int64(s.Clock.Now), int64(s.Clock.Seen))
}

// DescribeState describes s as "tokens=7 latestTick=3 start=0s now=350ms".
func (m JujuModel) DescribeState(s JujuState) string {
	return fmt.Sprintf("tokens=%d latestTick=%d start=%v now=%v", s.Tokens, s.LatestTick, s.Start, s.Clock.Now)
}

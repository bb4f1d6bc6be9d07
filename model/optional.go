package model

import (
	"errors"
	"fmt"
	"math/bits"
	"time"
)

// A model may have abilities beyond [Model]. The harness finds each by a
// type assertion on the model value, as io/fs finds a file system's, and
// uses it where it is there; the three models of this package have all of
// them.

// A Validator checks its own parameters. The harness calls Validate before
// any check runs, so that a model that cannot work (a zero window, a cost
// above the capacity) is reported as such instead of failing, or crashing,
// in the middle of a check.
type Validator interface {
	// Validate returns nil for usable parameters, or an error that wraps
	// ErrInvalid and names the field, the value and the range allowed.
	Validate() error
}

// A Balanced model reports the balance a state holds, as the budget's own
// Available() float64 method (budget.Balancer) would report it: the harness
// compares the two after every operation, which catches a state gone wrong
// before any answer shows it.
type Balanced[S any] interface {
	// Balance returns the balance of s as of its clock's reading, in
	// milli-units (Available() × 1000). It changes nothing.
	Balance(s S) int64
}

// A Starter can begin at any instant: InitAt returns the state of a budget
// built on a clock that reads now. The harness uses it to start budgets at
// negative instants and near the ends of int64, where slot arithmetic
// overflows or rounds the wrong way. Init() must equal InitAt(0).
type Starter[S any] interface {
	InitAt(now time.Duration) S
}

// A Timed model says how time matters to it. The harness takes the clock
// steps of every check from it when a subject gives none, so that a
// time-dependent budget cannot be checked with time switched off by
// omission.
type Timed interface {
	// Timing returns the step around which answers change (a slot width,
	// the time a refill takes to pay for the cheapest retry) and the
	// longest step that still matters (a window, the time an empty bucket
	// takes to fill). A zero scale says that no answer ever depends on
	// time; horizon is then zero too, and at least scale otherwise.
	Timing() (scale, horizon time.Duration)
}

// A Resetter can lose its state, as a budget kept in a store that restarts
// without persistence does. Only a Resetter is ever given Reset: the
// checks generate it, and a history may hold it, only for a model that has
// it, and Step of a model that is not one need not handle it.
type Resetter[S any] interface {
	// ResetState returns the state of a budget that has lost s: as new,
	// on the same clock. Step(s, Reset) must return the same.
	ResetState(s S) S
}

// A Structured model is told when attempts and calls end (AttemptEnd and
// CallEnd), as an in-flight budget (budget.InFlightBudget) is. The checks
// then draw every operation inside a call, as a retry loop makes them: a
// call begins with Request, each attempt that starts (the first, or a
// granted retry) ends once, a Success comes only from an attempt that has
// started and not ended, and after a denied retry the call ends. A model
// that is not Structured is never given AttemptEnd or CallEnd.
type Structured interface {
	Structured() bool
}

// An InFlightLimit says which retries an in-flight budget may grant, for
// the Race check's invariant: at the instant of every grant, the retries
// already in flight and the calls in flight must be admitted.
type InFlightLimit interface {
	// Admits reports whether a retry may be granted while active
	// retries and calls calls are in flight. It must be monotone: true
	// for fewer active retries or more calls whenever it is true.
	Admits(active, calls int64) bool
}

// MaxTiming is the longest scale or horizon a model's Timing returns: about
// 52 days. A longer one is reported as this; the checks still reach every
// instant through the jumps they make past the horizon.
const MaxTiming = time.Duration(1) << 52

// ErrInvalid is wrapped by every error a model's Validate returns.
var ErrInvalid = errors.New("model: invalid parameters")

func invalid(field string, got any, want string) error {
	return fmt.Errorf("%w: %s must be %s, got %v", ErrInvalid, field, want, got)
}

// The largest quantities the models accept, in milli-units: products of two
// of them, and sums over a window, stay far from overflow.
const (
	maxTokens = 1_000_000_000 // one million tokens
	maxCount  = 1 << 40
)

// Validate checks m: a capacity of 0.001 to a million tokens, costs from
// 0.001 to the capacity, a bonus from 0 to the capacity, a refill of 0 to a
// million tokens a second.
func (m TokenBucket) Validate() error {
	switch {
	case m.Capacity < 1 || m.Capacity > maxTokens:
		return invalid("TokenBucket.Capacity", m.Capacity, "in [1, 1e9] milli-tokens")
	case m.TransientCost < 1 || m.TransientCost > m.Capacity:
		return invalid("TokenBucket.TransientCost", m.TransientCost, fmt.Sprintf("in [1, Capacity=%d]", m.Capacity))
	case m.ThrottledCost < 1 || m.ThrottledCost > m.Capacity:
		return invalid("TokenBucket.ThrottledCost", m.ThrottledCost, fmt.Sprintf("in [1, Capacity=%d]", m.Capacity))
	case m.SuccessBonus < 0 || m.SuccessBonus > m.Capacity:
		return invalid("TokenBucket.SuccessBonus", m.SuccessBonus, fmt.Sprintf("in [0, Capacity=%d]", m.Capacity))
	case m.RefillPerSecond < 0 || m.RefillPerSecond > maxTokens:
		return invalid("TokenBucket.RefillPerSecond", m.RefillPerSecond, "in [0, 1e9] milli-tokens a second")
	}
	return nil
}

// InitAt returns a full bucket on a clock reading now. Without refill the
// state does not track time, and InitAt returns Init().
func (m TokenBucket) InitAt(now time.Duration) TokenBucketState {
	s := m.Init()
	if m.RefillPerSecond > 0 {
		s.Clock = Clock{Now: now, Seen: now}
	}
	return s
}

// Validate checks m: a ratio of 1 to 1,000,000 parts per million, a positive
// window, 1 to 2^20 slots and no more slots than the window has
// nanoseconds, and a floor and a reserve of 0 to 2^40 each.
func (m Ratio) Validate() error {
	switch {
	case m.PPM < 1 || m.PPM > 1_000_000:
		return invalid("Ratio.PPM", m.PPM, "in [1, 1000000]")
	case m.Window <= 0:
		return invalid("Ratio.Window", m.Window, "positive")
	case m.Slots < 1 || m.Slots > 1<<20:
		return invalid("Ratio.Slots", m.Slots, "in [1, 1048576]")
	case m.Slots > int64(m.Window):
		return invalid("Ratio.Slots", m.Slots, fmt.Sprintf("at most the window's %d nanoseconds", int64(m.Window)))
	case m.Floor < 0 || m.Floor > maxCount:
		return invalid("Ratio.Floor", m.Floor, "in [0, 2^40]")
	case m.Reserve < 0 || m.Reserve > maxCount:
		return invalid("Ratio.Reserve", m.Reserve, "in [0, 2^40]")
	}
	return nil
}

// InitAt returns an empty window on a clock reading now.
func (m Ratio) InitAt(now time.Duration) RatioState {
	return RatioState{Clock: Clock{Now: now, Seen: now}}
}

// Validate checks m: a maximum of 0.001 to 1000 tokens and a ratio of 0.001
// to 1000 tokens.
func (m Throttle) Validate() error {
	switch {
	case m.Max < 1 || m.Max > 1_000_000:
		return invalid("Throttle.Max", m.Max, "in [1, 1000000] milli-tokens")
	case m.Ratio < 1 || m.Ratio > 1_000_000:
		return invalid("Throttle.Ratio", m.Ratio, "in [1, 1000000] milli-tokens")
	}
	return nil
}

// InitAt returns Init(): nothing in a throttle observes the clock.
func (m Throttle) InitAt(time.Duration) ThrottleState { return m.Init() }

// Timing returns, for a bucket that refills, the time the refill takes to
// pay for the cheaper retry and the time it takes to fill an empty bucket,
// each rounded up to a nanosecond and at most MaxTiming; (0, 0) without
// refill, where time changes nothing.
func (m TokenBucket) Timing() (scale, horizon time.Duration) {
	if m.RefillPerSecond <= 0 {
		return 0, 0
	}
	scale = refillTime(min(m.TransientCost, m.ThrottledCost), m.RefillPerSecond)
	return scale, max(scale, refillTime(m.Capacity, m.RefillPerSecond))
}

// refillTime returns how long rate (milli-units a second) takes to earn
// milli, rounded up, between 1 ns and MaxTiming.
func refillTime(milli, rate int64) time.Duration {
	hi, lo := bits.Mul64(uint64(max(milli, 1)), uint64(time.Second))
	if hi >= uint64(rate) {
		return MaxTiming
	}
	q, r := bits.Div64(hi, lo, uint64(rate))
	if r > 0 {
		q++
	}
	return time.Duration(min(max(q, 1), uint64(MaxTiming)))
}

// Timing returns the slot width and the window, each at most MaxTiming.
func (m Ratio) Timing() (scale, horizon time.Duration) {
	if m.Slots <= 0 || m.Window <= 0 {
		return 0, 0 // not a usable model: Validate says why
	}
	return min(max(m.Window/time.Duration(m.Slots), 1), MaxTiming), min(m.Window, MaxTiming)
}

// Timing returns (0, 0): nothing in a throttle observes the clock.
func (m Throttle) Timing() (scale, horizon time.Duration) { return 0, 0 }

// ResetState returns a full bucket on the clock of s.
func (m TokenBucket) ResetState(s TokenBucketState) TokenBucketState {
	return TokenBucketState{Tokens: m.Capacity, Clock: s.Clock}
}

// ResetState returns an empty window on the clock of s.
func (m Ratio) ResetState(s RatioState) RatioState { return RatioState{Clock: s.Clock} }

// ResetState returns a full count.
func (m Throttle) ResetState(ThrottleState) ThrottleState { return m.Init() }

var (
	_ Resetter[TokenBucketState] = TokenBucket{}
	_ Resetter[RatioState]       = Ratio{}
	_ Resetter[ThrottleState]    = Throttle{}
	_ Timed                      = InFlight{}
	_ Validator                  = InFlight{}
	_ Structured                 = InFlight{}
	_ InFlightLimit              = InFlight{}
	_ Balanced[InFlightState]    = InFlight{}
	_ Timed                      = TokenBucket{}
	_ Timed                      = Ratio{}
	_ Timed                      = Throttle{}
	_ Validator                  = TokenBucket{}
	_ Validator                  = Ratio{}
	_ Validator                  = Throttle{}
	_ Balanced[TokenBucketState] = TokenBucket{}
	_ Balanced[ThrottleState]    = Throttle{}
	_ Starter[TokenBucketState]  = TokenBucket{}
	_ Starter[RatioState]        = Ratio{}
	_ Starter[ThrottleState]     = Throttle{}
)

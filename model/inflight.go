package model

import (
	"fmt"
	"strconv"
	"time"
)

// InFlightRule names how an [InFlight] budget turns the calls in flight
// into the retries it allows in flight.
type InFlightRule uint8

const (
	// Envoy is the rule of Envoy's retry_budget and of Istio's
	// DestinationRule RetryBudget: a retry is granted while the retries in
	// flight are fewer than max(MinConcurrency, ⌊PPM × calls in flight /
	// 1e6⌋). Envoy computes the product in floating point and truncates
	// it; the model computes it exactly.
	Envoy InFlightRule = iota
	// Failsafe is the rule of failsafe-go's budget (v0.9.8): a retry is
	// denied when the retries in flight are at least MinConcurrency and
	// their share of the executions in flight, retries/(calls + retries),
	// is above PPM/1e6; a call in its retry is one execution as a call and
	// one more as a retry, as failsafe-go counts it.
	Failsafe
)

// String returns "envoy", "failsafe" or "InFlightRule(N)".
func (r InFlightRule) String() string {
	switch r {
	case Envoy:
		return "envoy"
	case Failsafe:
		return "failsafe"
	}
	return "InFlightRule(" + strconv.Itoa(int(r)) + ")"
}

// InFlight specifies a budget that caps the work in flight, not the work
// done: the retries in flight against the calls in flight.
//
// A call is in flight from its Request to its CallEnd, whatever it does in
// between (an attempt, a backoff wait). A retry is in flight from the
// Retry that granted it to its AttemptEnd: during the backoff before it
// and during its attempt, as Envoy counts an active retry from the moment
// it schedules it. Retry(k), for a retry kind, is granted when Rule admits
// one more retry, and is then in flight; a retry that is denied, or asked
// for with a kind that is not a retry kind, changes nothing.
// AttemptEnd(k), for a retry kind, ends a retry in flight; Success and
// AttemptEnd(FirstAttempt) change nothing. Nothing observes the clock.
//
// Input that breaks the call structure (an end of something that never
// started) changes nothing: a CallEnd with no call in flight, and an
// AttemptEnd of a retry kind with no retry in flight, are ignored, so the
// counts never go below zero. The checks never generate such input; a
// minimized counterexample may still hold it, since dropping a Request
// leaves its CallEnd behind. Each count stops at 2^32 - 1, as the
// reference budget's do.
type InFlight struct {
	// PPM is the share, in parts per million, of the calls in flight that
	// may be retries in flight: Envoy's budget_percent × 10,000, or
	// failsafe-go's maxRate × 1e6.
	PPM int64
	// MinConcurrency is how many retries in flight the rule always
	// allows, however few the calls: Envoy's min_retry_concurrency,
	// failsafe-go's minConcurrency.
	MinConcurrency int64
	Rule           InFlightRule
}

// InFlightState is the state of an InFlight.
type InFlightState struct {
	Calls   int64 // calls in flight
	Retries int64 // retries in flight
}

var _ Model[InFlightState] = InFlight{}

// EnvoyDefaults returns Envoy's retry_budget with its defaults: a
// budget_percent of 20% and a min_retry_concurrency of 3.
func EnvoyDefaults() InFlight { return InFlight{PPM: 200_000, MinConcurrency: 3, Rule: Envoy} }

// FailsafeDefaults returns failsafe-go's budget (v0.9.8) with its
// defaults: a maxRate of 0.2 and a minConcurrency of 3.
func FailsafeDefaults() InFlight { return InFlight{PPM: 200_000, MinConcurrency: 3, Rule: Failsafe} }

// Init returns a budget with nothing in flight.
func (m InFlight) Init() InFlightState { return InFlightState{} }

// Admits reports whether the rule grants a retry when active retries and
// calls calls are in flight. It grants less as active grows and more as
// calls grows, which the Race check relies on.
func (m InFlight) Admits(active, calls int64) bool {
	active, calls = max(active, 0), max(calls, 0)
	if active < m.MinConcurrency {
		return true
	}
	if m.Rule == Failsafe {
		// active/(calls+active) <= PPM/1e6, in integers; at most 2^41 ×
		// 1e6 on either side.
		return active*1_000_000 <= m.PPM*(calls+active)
	}
	return active < m.PPM*calls/1_000_000
}

// Step applies op.
func (m InFlight) Step(s InFlightState, op Op) (InFlightState, bool) {
	switch op.Op {
	case Request:
		if s.Calls < maxInFlight {
			s.Calls++
		}
	case CallEnd:
		if s.Calls > 0 {
			s.Calls--
		}
	case Retry:
		if !op.Kind.IsRetry() || s.Retries == maxInFlight || !m.Admits(s.Retries, s.Calls) {
			return s, false
		}
		s.Retries++
		return s, true
	case AttemptEnd:
		if op.Kind.IsRetry() && s.Retries > 0 {
			s.Retries--
		}
	}
	return s, false
}

// maxInFlight is where each count of an InFlight stops.
const maxInFlight = 1<<32 - 1

// Balance returns how many more retries would be granted from s with
// nothing else happening, in milli-units, as the reference budget's
// Available reports it: the retries the rule admits, less those in flight.
func (m InFlight) Balance(s InFlightState) int64 {
	limit := m.limit(s.Calls)
	if s.Retries >= limit {
		return 0
	}
	return (limit - s.Retries) * 1000
}

// limit returns the retries in flight the rule admits with calls in flight:
// the least count at which Admits says no, at most 2^32 - 1.
func (m InFlight) limit(calls int64) int64 {
	var l int64
	switch {
	case m.Rule != Failsafe:
		l = m.PPM * calls / 1_000_000
	case m.PPM >= 1_000_000:
		l = maxInFlight
	default:
		// active×1e6 <= PPM×(calls+active) ⟺ active <= PPM×calls/(1e6-PPM).
		l = m.PPM*calls/(1_000_000-m.PPM) + 1
	}
	return min(max(l, m.MinConcurrency), maxInFlight)
}

// Equal reports a == b: the counts are the whole behaviour.
func (m InFlight) Equal(a, b InFlightState) bool { return a == b }

// Hash hashes s.
func (m InFlight) Hash(s InFlightState) uint64 { return Hash(s.Calls, s.Retries) }

// DescribeState describes s as "calls=12 retries=3".
func (m InFlight) DescribeState(s InFlightState) string {
	return "calls=" + strconv.FormatInt(s.Calls, 10) + " retries=" + strconv.FormatInt(s.Retries, 10)
}

// Validate checks m: a share of 0 to 1,000,000 parts per million, a
// MinConcurrency of 0 to 2^32 - 1, and a known rule.
func (m InFlight) Validate() error {
	switch {
	case m.PPM < 0 || m.PPM > 1_000_000:
		return invalid("InFlight.PPM", m.PPM, "in [0, 1000000]")
	case m.MinConcurrency < 0 || m.MinConcurrency > maxInFlight:
		return invalid("InFlight.MinConcurrency", m.MinConcurrency, "in [0, 2^32-1]")
	case m.Rule > Failsafe:
		return invalid("InFlight.Rule", m.Rule, fmt.Sprintf("%v or %v", Envoy, Failsafe))
	}
	return nil
}

// Timing returns (0, 0): nothing in an in-flight budget observes the
// clock.
func (m InFlight) Timing() (scale, horizon time.Duration) { return 0, 0 }

// Structured reports true: an InFlight is told when attempts and calls
// end, and the checks generate calls with their structure.
func (m InFlight) Structured() bool { return true }

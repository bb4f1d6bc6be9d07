package model

import (
	"math/bits"
	"slices"
	"strconv"
	"time"
)

// Ratio specifies a sliding-window ratio budget.
//
// Time is cut into slots of Window/Slots nanoseconds (rounded down); slot n
// covers [n×width, (n+1)×width), for negative instants too. The window at an
// instant in slot h holds slots h-Slots+1 through h. Request counts a request
// in the current slot. Retry(k), for a retry kind, is granted when the
// retries in the window plus this one are at most
// max(Floor, ⌊PPM × requests in the window / 1e6⌋ + Reserve), and is then
// counted in the current slot; otherwise it changes nothing. Success changes
// nothing.
//
// Floor and Reserve are the two ways deployed budgets let low traffic
// retry. Floor is a minimum the ratio's allowance is raised to, as in the
// Google SRE book's budget and Envoy's min_retry_concurrency. Reserve is
// added to the allowance, as Finagle's and tower's budgets add min_per_sec
// × ttl: with Reserve, 1000 requests at 10% allow 100 + Reserve retries,
// with Floor only max(100, Floor).
//
// Request and Retry (of a retry kind) observe the clock.
type Ratio struct {
	PPM    int64 // the ratio, in parts per million
	Window time.Duration
	Slots  int64
	Floor  int64
	// Reserve is added to the ratio's allowance in every window.
	Reserve int64
}

// SRE returns the budget of the Google SRE book with Envoy's floor: 10% of
// requests over 10 s in 10 slots, and at least 3 retries.
func SRE() Ratio {
	return Ratio{PPM: 100_000, Window: 10 * time.Second, Slots: 10, Floor: 3}
}

// RatioState is the state of a Ratio. Window lists the slots of the current
// window that hold a count, oldest first; it is never modified in place.
type RatioState struct {
	Clock  Clock
	Window []SlotCount
}

// SlotCount is what one slot of time holds.
type SlotCount struct {
	Slot     int64 // slot number: the instant divided by the width, rounded down
	Requests int64
	Retries  int64
}

var (
	_ Model[RatioState]    = Ratio{}
	_ Balanced[RatioState] = Ratio{}
)

// Init returns an empty window at time 0.
func (m Ratio) Init() RatioState { return RatioState{} }

func (m Ratio) width() int64 { return int64(m.Window) / m.Slots }

// Step applies op.
func (m Ratio) Step(s RatioState, op Op) (RatioState, bool) {
	switch op.Op {
	case Reset:
		return m.ResetState(s), false
	case Advance:
		s.Clock = s.Clock.Advance(op.D)
	case Request:
		s = m.slide(s)
		s.Window = add(s.Window, m.head(s), 1, 0)
	case Retry:
		if !op.Kind.IsRetry() {
			return s, false
		}
		s = m.slide(s)
		retries, allowed := m.counts(s)
		if retries+1 > m.Floor && uint64(retries+1) > allowed {
			return s, false
		}
		s.Window = add(s.Window, m.head(s), 0, 1)
		return s, true
	}
	return s, false
}

// counts returns the retries in s's window and the ratio's allowance,
// ⌊PPM × requests / 1e6⌋ + Reserve, computed without overflow.
func (m Ratio) counts(s RatioState) (retries int64, allowed uint64) {
	var reqs int64
	for _, c := range s.Window {
		reqs += c.Requests
		retries += c.Retries
	}
	hi, lo := bits.Mul64(uint64(reqs), uint64(m.PPM))
	allowed, _ = bits.Div64(hi, lo, 1_000_000)
	return retries, allowed + uint64(m.Reserve)
}

// head returns the slot number of the latest instant seen.
func (m Ratio) head(s RatioState) int64 {
	t, w := int64(s.Clock.Seen), m.width()
	q := t / w
	if t%w < 0 {
		q--
	}
	return q
}

// slide observes the clock and drops the slots that have left the window.
func (m Ratio) slide(s RatioState) RatioState {
	s.Clock = s.Clock.Observe()
	h := m.head(s)
	keep := slices.IndexFunc(s.Window, func(c SlotCount) bool {
		return uint64(h)-uint64(c.Slot) < uint64(m.Slots) // c.Slot <= h always
	})
	if keep < 0 {
		s.Window = nil
	} else {
		s.Window = s.Window[keep:]
	}
	return s
}

// add returns w with reqs and retries added to slot n, the newest slot,
// copying rather than modifying w.
func add(w []SlotCount, n, reqs, retries int64) []SlotCount {
	out := make([]SlotCount, len(w), len(w)+1)
	copy(out, w)
	if len(out) > 0 && out[len(out)-1].Slot == n {
		out[len(out)-1].Requests += reqs
		out[len(out)-1].Retries += retries
		return out
	}
	return append(out, SlotCount{Slot: n, Requests: reqs, Retries: retries})
}

// Balance returns, in milli-units, how many more retries the window would
// grant as of its clock's reading: max(Floor, ⌊PPM × requests / 1e6⌋ +
// Reserve) minus the retries in the window, or 0. It is what
// budget.Ratio's Available reports.
func (m Ratio) Balance(s RatioState) int64 {
	retries, allowed := m.counts(m.slide(s))
	limit := max(uint64(m.Floor), allowed)
	if uint64(retries) >= limit {
		return 0
	}
	return int64(limit-uint64(retries)) * 1000
}

// Equal reports whether a and b hold the same clock and counts.
func (m Ratio) Equal(a, b RatioState) bool {
	return a.Clock == b.Clock && slices.Equal(a.Window, b.Window)
}

// Hash hashes s.
func (m Ratio) Hash(s RatioState) uint64 {
	words := make([]int64, 0, 2+3*len(s.Window))
	words = append(words, int64(s.Clock.Now), int64(s.Clock.Seen))
	for _, c := range s.Window {
		words = append(words, c.Slot, c.Requests, c.Retries)
	}
	return Hash(words...)
}

// DescribeState describes s as "requests=50 retries=5 now=1.2s".
func (m Ratio) DescribeState(s RatioState) string {
	var reqs, retries int64
	for _, c := range s.Window {
		reqs += c.Requests
		retries += c.Retries
	}
	return "requests=" + strconv.FormatInt(reqs, 10) + " retries=" + strconv.FormatInt(retries, 10) + " " + s.Clock.String()
}

package mutants

import (
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// ratio is a plain sliding-window ratio budget: a ring of slots tagged with
// their slot numbers, summed on every retry. It is correct for every int64
// clock reading unless one of its bug hooks says otherwise; each ratio
// mutant sets one hook.
type ratio struct {
	mu    sync.Mutex
	m     model.Ratio
	clock budget.Clock
	last  time.Duration
	ring  []model.SlotCount // slot number n lives at index(n)

	// allowed returns how many retries the window allows. Correct:
	// max(floor, proportional).
	allowed func(floor, proportional int64) int64
	// inWindow reports whether slot number n counts in the window whose
	// newest slot is h. Correct: h-n < Slots, in unsigned arithmetic.
	inWindow func(h, n int64) bool
	// reuse makes s hold slot number n. Correct: clear its counts.
	reuse func(s *model.SlotCount, n int64)
	// index returns where slot number n lives. Correct: n mod Slots,
	// rounded towards negative infinity.
	index func(n int64) int64
	// requests returns the window's request count as the budget keeps
	// it, from the true count n. Correct: n.
	requests func(n int64) int64
}

func newRatio(m model.Ratio, clock budget.Clock) *ratio {
	r := &ratio{m: m, clock: clock, ring: make([]model.SlotCount, m.Slots)}
	r.last = clock.Now()
	head := floorDiv(int64(r.last), r.width())
	for i := range r.ring {
		r.ring[i].Slot = int64(uint64(head) - uint64(m.Slots)) // in no window from now on
	}
	r.allowed = func(floor, proportional int64) int64 { return max(floor, proportional) }
	r.inWindow = func(h, n int64) bool { return uint64(h)-uint64(n) < uint64(m.Slots) }
	r.reuse = func(s *model.SlotCount, n int64) { *s = model.SlotCount{Slot: n} }
	r.index = func(n int64) int64 { return floorMod(n, m.Slots) }
	r.requests = func(n int64) int64 { return n }
	return r
}

func (r *ratio) width() int64 { return int64(r.m.Window) / r.m.Slots }

func (r *ratio) Request() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slot().Requests++
}

func (r *ratio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.slot()
	h := s.Slot
	var reqs, retries int64
	for _, c := range r.ring {
		if r.inWindow(h, c.Slot) {
			reqs += c.Requests
			retries += c.Retries
		}
	}
	reqs = r.requests(reqs)
	proportional := reqs/1_000_000*r.m.PPM + reqs%1_000_000*r.m.PPM/1_000_000
	if retries+1 > r.allowed(r.m.Floor, proportional) {
		return false
	}
	s.Retries++
	return true
}

func (r *ratio) Success(budget.Kind) {}

// slot returns the slot of the current instant, cleared if it last held an
// older slot number. r.mu must be held.
func (r *ratio) slot() *model.SlotCount {
	if now := r.clock.Now(); now > r.last {
		r.last = now
	}
	n := floorDiv(int64(r.last), r.width())
	s := &r.ring[r.index(n)]
	if s.Slot != n {
		r.reuse(s, n)
	}
	return s
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// FloorAdded is a ratio budget that adds the floor to the ratio's allowance
// (retries ≤ Floor + Ratio × requests) instead of taking the larger of the
// two. Under load it grants Floor extra retries in every window, so the
// ratio it promises no longer holds.
//
// Bug class: the floor applied as an addend, a misreading that "a ratio with
// a floor of N retries" allows. Caught by the sequential check.
type FloorAdded struct{ *ratio }

var _ budget.Budget = FloorAdded{}

// NewFloorAdded returns an empty FloorAdded for m reading clock.
func NewFloorAdded(m model.Ratio, clock budget.Clock) FloorAdded {
	r := newRatio(m, clock)
	r.allowed = func(floor, proportional int64) int64 { return floor + proportional } // BUG
	return FloorAdded{r}
}

// NeverEvicted is a ratio budget whose slots are relabelled for the new
// slot of time but never cleared, so what a slot counted a window ago still
// counts: old requests keep inflating the allowance, and old retries keep
// using it up. Over time the budget drifts from its ratio in both
// directions.
//
// Bug class: a ring buffer whose reuse forgets to reset the entry (the
// expiry half of a sliding window left out). Caught by the sequential
// check.
type NeverEvicted struct{ *ratio }

var _ budget.Budget = NeverEvicted{}

// NewNeverEvicted returns an empty NeverEvicted for m reading clock.
func NewNeverEvicted(m model.Ratio, clock budget.Clock) NeverEvicted {
	r := newRatio(m, clock)
	r.reuse = func(s *model.SlotCount, n int64) { s.Slot = n } // BUG: counts kept
	return NeverEvicted{r}
}

// EarlyEviction is a ratio budget whose window holds one slot fewer than
// it should: a count leaves the window a slot width early, so the window is
// (Slots-1)/Slots of what was configured. With few slots the loss is large:
// two slots make a window of half the configured length.
//
// Seen in: tower's retry budget (Rust), whose expiry loop clears one slot
// too many, so deposits are forgotten before the window has passed. Caught
// by the sequential check.
type EarlyEviction struct{ *ratio }

var _ budget.Budget = EarlyEviction{}

// NewEarlyEviction returns an empty EarlyEviction for m reading clock.
func NewEarlyEviction(m model.Ratio, clock budget.Clock) EarlyEviction {
	r := newRatio(m, clock)
	r.inWindow = func(h, n int64) bool { return uint64(h)-uint64(n) < uint64(m.Slots)-1 } // BUG: one slot short
	return EarlyEviction{r}
}

// NegativeModulo is a ratio budget that finds a slot's place in its ring
// with Go's % operator, which keeps the sign of the dividend: for a clock
// reading before zero the index is negative, and the slice index panics.
// Clocks that start at zero hide it; a clock with an arbitrary origin, or
// a slot number taken from a wall-clock time before 1970, does not.
//
// Bug class: a modulo that assumes a non-negative operand. Caught by the
// suite's Edges check (and budgettest.Fuzz, and FuzzRatioWindow), which
// start the clock at negative readings.
type NegativeModulo struct{ *ratio }

var _ budget.Budget = NegativeModulo{}

// NewNegativeModulo returns an empty NegativeModulo for m reading clock.
func NewNegativeModulo(m model.Ratio, clock budget.Clock) NegativeModulo {
	r := newRatio(m, clock)
	r.index = func(n int64) int64 { return n % m.Slots } // BUG: negative for n < 0
	return NegativeModulo{r}
}

// SlotStartOverflow is a ratio budget that decides whether a slot is still
// in the window by comparing times instead of slot numbers: slot n is in the
// window of slot h while n×width + window > h×width. Near the top of int64
// the left side overflows to a negative number, and a slot that holds this
// very window's counts reads as expired.
//
// Bug class: time arithmetic that overflows at the edge of its type (the
// "start + window" of an expiry test). Caught by the suite's Edges check
// (and budgettest.Fuzz, and FuzzRatioWindow), which start the clock near
// math.MaxInt64.
type SlotStartOverflow struct{ *ratio }

var _ budget.Budget = SlotStartOverflow{}

// NewSlotStartOverflow returns an empty SlotStartOverflow for m reading clock.
func NewSlotStartOverflow(m model.Ratio, clock budget.Clock) SlotStartOverflow {
	r := newRatio(m, clock)
	w := r.width()
	r.inWindow = func(h, n int64) bool {
		return n <= h && n*w+m.Slots*w > h*w // BUG: n*w + window overflows near MaxInt64
	}
	return SlotStartOverflow{r}
}

// RatioMutants returns the ratio mutants by name, for tools that pick one
// (the fuzz targets read RETRYBUDGET_FUZZ_RATIO).
func RatioMutants() map[string]func(model.Ratio, budget.Clock) budget.Budget {
	return map[string]func(model.Ratio, budget.Clock) budget.Budget{
		"FloorAdded":        func(m model.Ratio, c budget.Clock) budget.Budget { return NewFloorAdded(m, c) },
		"NeverEvicted":      func(m model.Ratio, c budget.Clock) budget.Budget { return NewNeverEvicted(m, c) },
		"EarlyEviction":     func(m model.Ratio, c budget.Clock) budget.Budget { return NewEarlyEviction(m, c) },
		"NegativeModulo":    func(m model.Ratio, c budget.Clock) budget.Budget { return NewNegativeModulo(m, c) },
		"SlotStartOverflow": func(m model.Ratio, c budget.Clock) budget.Budget { return NewSlotStartOverflow(m, c) },
	}
}

// CorrectRatio is the ratio budget the mutants are built from, with no bug.
// The harness runs it to show that a mutant's failure comes from its bug.
type CorrectRatio struct{ *ratio }

var _ budget.Budget = CorrectRatio{}

// NewCorrectRatio returns an empty CorrectRatio for m reading clock.
func NewCorrectRatio(m model.Ratio, clock budget.Clock) CorrectRatio {
	return CorrectRatio{newRatio(m, clock)}
}

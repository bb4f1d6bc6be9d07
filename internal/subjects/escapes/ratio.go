package escapes

import (
	"fmt"
	"math/bits"
	"sync"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// WideSlotTagModel is the rule WideSlotTag follows: the Google SRE book's
// 10% of requests over 10 s, in ten 1 s slots, with a floor of 3 retries.
var WideSlotTagModel = model.Ratio{PPM: 100_000, Window: 10e9, Slots: 10, Floor: 3}

// NarrowSlotTagModel is the rule NarrowSlotTag claims to follow: the same
// as WideSlotTagModel.
var NarrowSlotTagModel = WideSlotTagModel

// ratioRule is the allowance arithmetic both ring budgets share.
type ratioRule struct {
	m     model.Ratio
	width int64
}

func newRatioRule(m model.Ratio) ratioRule {
	if err := m.Validate(); err != nil {
		panic(fmt.Sprintf("escapes: %v", err))
	}
	return ratioRule{m: m, width: int64(m.Window) / m.Slots}
}

// admits reports whether one more retry keeps the window within
// max(Floor, ⌊PPM × reqs / 1e6⌋ + Reserve).
func (r ratioRule) admits(reqs, retries int64) bool {
	hi, lo := bits.Mul64(uint64(reqs), uint64(r.m.PPM))
	allowed, _ := bits.Div64(hi, lo, 1_000_000)
	allowed += uint64(r.m.Reserve)
	return retries+1 <= r.m.Floor || uint64(retries+1) <= allowed
}

// ---------------------------------------------------------------------------
// NarrowSlotTag: the mutant.

// NarrowSlotTag is a sliding-window ratio budget kept in a ring of Slots
// slots. Each slot is tagged with its slot number truncated to 16 bits:
// "the ring only ever holds the last Slots slots, and 16-bit serial
// arithmetic tells them apart".
//
// BUG (deliberate): after an idle gap of 65,536 slot widths (18.2 hours at
// 1 s slots), or a multiple of it, give or take the window, a stale slot's
// tag equals that of a slot in the current window, and the counts it held
// come back: old requests raise the allowance and old retries use it up.
type NarrowSlotTag struct {
	rule  ratioRule
	clock budget.Clock

	mu   sync.Mutex
	last int64 // latest clock reading seen, ns
	ring []narrowSlot
}

type narrowSlot struct {
	tag     uint16 // slot number mod 2^16
	reqs    int64
	retries int64
}

var _ budget.Budget = (*NarrowSlotTag)(nil)

// NewNarrowSlotTag returns an empty NarrowSlotTag following m, on clock.
func NewNarrowSlotTag(m model.Ratio, clock budget.Clock) *NarrowSlotTag {
	r := newRatioRule(m)
	if m.Slots >= 1<<16 {
		panic("escapes: NarrowSlotTag needs fewer than 65536 slots")
	}
	b := &NarrowSlotTag{rule: r, clock: clock, last: int64(clock.Now()), ring: make([]narrowSlot, m.Slots)}
	return b
}

// slide observes the clock and returns the current slot number and the
// totals of the window. b.mu must be held.
func (b *NarrowSlotTag) slide() (head int64, reqs, retries int64) {
	if now := int64(b.clock.Now()); now > b.last {
		b.last = now
	}
	head = floorDiv(b.last, b.rule.width)
	h := uint16(head)
	for i := range b.ring {
		s := &b.ring[i]
		if h-s.tag < uint16(len(b.ring)) { // slot h-Slots+1 .. h
			reqs += s.reqs
			retries += s.retries
		}
	}
	return head, reqs, retries
}

// current returns the ring slot of slot number head, emptied if it held an
// older slot. b.mu must be held.
func (b *NarrowSlotTag) current(head int64) *narrowSlot {
	s := &b.ring[floorMod(head, int64(len(b.ring)))]
	if s.tag != uint16(head) {
		*s = narrowSlot{tag: uint16(head)}
	}
	return s
}

// Request counts a request in the current slot.
func (b *NarrowSlotTag) Request() {
	b.mu.Lock()
	defer b.mu.Unlock()
	head, _, _ := b.slide()
	b.current(head).reqs++
}

// Retry grants a retry of a retry kind when the window allows one more, and
// counts it.
func (b *NarrowSlotTag) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	head, reqs, retries := b.slide()
	if !b.rule.admits(reqs, retries) {
		return false
	}
	b.current(head).retries++
	return true
}

// Success does nothing: the window recovers as it slides.
func (b *NarrowSlotTag) Success(budget.Kind) {}

// ---------------------------------------------------------------------------
// WideSlotTag: the twin.

// WideSlotTag is NarrowSlotTag with each slot tagged by its full int64 slot
// number, so a slot is in the window exactly when the unsigned distance from
// it to the current slot is below Slots, whatever the gap, at negative
// instants and across the ends of int64 too. It follows WideSlotTagModel
// (or the model.Ratio it is built with) exactly.
type WideSlotTag struct {
	rule  ratioRule
	clock budget.Clock

	mu   sync.Mutex
	last int64
	ring []wideSlot
}

type wideSlot struct {
	n       int64 // slot number
	reqs    int64
	retries int64
}

var _ budget.Budget = (*WideSlotTag)(nil)

// NewWideSlotTag returns an empty WideSlotTag following m, on clock.
func NewWideSlotTag(m model.Ratio, clock budget.Clock) *WideSlotTag {
	return &WideSlotTag{rule: newRatioRule(m), clock: clock, last: int64(clock.Now()), ring: make([]wideSlot, m.Slots)}
}

func (b *WideSlotTag) slide() (head int64, reqs, retries int64) {
	if now := int64(b.clock.Now()); now > b.last {
		b.last = now
	}
	head = floorDiv(b.last, b.rule.width)
	for i := range b.ring {
		s := &b.ring[i]
		if uint64(head)-uint64(s.n) < uint64(len(b.ring)) {
			reqs += s.reqs
			retries += s.retries
		}
	}
	return head, reqs, retries
}

func (b *WideSlotTag) current(head int64) *wideSlot {
	s := &b.ring[floorMod(head, int64(len(b.ring)))]
	if s.n != head {
		*s = wideSlot{n: head}
	}
	return s
}

// Request counts a request in the current slot.
func (b *WideSlotTag) Request() {
	b.mu.Lock()
	defer b.mu.Unlock()
	head, _, _ := b.slide()
	b.current(head).reqs++
}

// Retry grants a retry of a retry kind when the window allows one more, and
// counts it.
func (b *WideSlotTag) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	head, reqs, retries := b.slide()
	if !b.rule.admits(reqs, retries) {
		return false
	}
	b.current(head).retries++
	return true
}

// Success does nothing: the window recovers as it slides.
func (b *WideSlotTag) Success(budget.Kind) {}

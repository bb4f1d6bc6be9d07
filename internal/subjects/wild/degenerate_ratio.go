package wild

import (
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// RoundedAllowanceRatio is a ring of tagged slots that rounds the allowance
// to the nearest whole retry (degenerate constants: exact while requests ×
// ratio is whole; 45 requests at 0.1 allow 5 retries, not 4).
type RoundedAllowanceRatio struct {
	ppm, floor, width, n int64
	clock                budget.Clock

	mu   sync.Mutex
	seen int64
	ring []ratioEntry
}

type ratioEntry struct {
	slot, reqs, retries int64
	live                bool
}

// NewRoundedAllowanceRatio returns an empty budget of ppm parts per million.
func NewRoundedAllowanceRatio(ppm int64, window time.Duration, slots, floor int64, clock budget.Clock) *RoundedAllowanceRatio {
	return &RoundedAllowanceRatio{ppm: ppm, floor: floor, width: int64(window) / slots, n: slots, clock: clock,
		seen: int64(clock.Now()), ring: make([]ratioEntry, slots)}
}

func (r *RoundedAllowanceRatio) entry() (*ratioEntry, int64) {
	if now := int64(r.clock.Now()); now > r.seen {
		r.seen = now
	}
	h := floorDiv(r.seen, r.width)
	e := &r.ring[floorMod(h, r.n)]
	if !e.live || e.slot != h {
		*e = ratioEntry{slot: h, live: true}
	}
	return e, h
}

// Request counts a request.
func (r *RoundedAllowanceRatio) Request() {
	r.mu.Lock()
	e, _ := r.entry()
	e.reqs++
	r.mu.Unlock()
}

// Retry grants and counts a retry if the window allows it.
func (r *RoundedAllowanceRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, h := r.entry()
	var reqs, retries int64
	for _, e := range r.ring {
		if e.live && uint64(h)-uint64(e.slot) < uint64(r.n) {
			reqs, retries = reqs+e.reqs, retries+e.retries
		}
	}
	allowed := (reqs*r.ppm + 500_000) / 1_000_000
	if retries+1 > max(r.floor, allowed) {
		return false
	}
	cur.retries++
	return true
}

// Success does nothing.
func (r *RoundedAllowanceRatio) Success(budget.Kind) {}

// ProportionalSlotRatio is a ring of tagged slots that numbers slots as
// ⌊now × Slots / Window⌋ (degenerate constants: the same as
// ⌊now / (Window/Slots)⌋ when Window is a multiple of Slots, but with 10 s in
// 3 slots its boundaries fall a nanosecond or more after the model's).
type ProportionalSlotRatio struct {
	ppm, floor, n int64
	window        int64
	clock         budget.Clock

	mu   sync.Mutex
	seen int64
	ring []ratioEntry
}

// NewProportionalSlotRatio returns an empty budget of ppm parts per million.
func NewProportionalSlotRatio(ppm int64, window time.Duration, slots, floor int64, clock budget.Clock) *ProportionalSlotRatio {
	return &ProportionalSlotRatio{ppm: ppm, floor: floor, n: slots, window: int64(window), clock: clock,
		seen: int64(clock.Now()), ring: make([]ratioEntry, slots)}
}

// head returns the current slot number, ⌊seen × n / window⌋ without overflow.
func (r *ProportionalSlotRatio) head() int64 {
	if now := int64(r.clock.Now()); now > r.seen {
		r.seen = now
	}
	return floorDiv(r.seen, r.window)*r.n + floorMod(r.seen, r.window)*r.n/r.window
}

func (r *ProportionalSlotRatio) entry(h int64) *ratioEntry {
	e := &r.ring[floorMod(h, r.n)]
	if !e.live || e.slot != h {
		*e = ratioEntry{slot: h, live: true}
	}
	return e
}

// Request counts a request.
func (r *ProportionalSlotRatio) Request() {
	r.mu.Lock()
	r.entry(r.head()).reqs++
	r.mu.Unlock()
}

// Retry grants and counts a retry if the window allows it.
func (r *ProportionalSlotRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.head()
	var reqs, retries int64
	for _, e := range r.ring {
		if e.live && uint64(h)-uint64(e.slot) < uint64(r.n) {
			reqs, retries = reqs+e.reqs, retries+e.retries
		}
	}
	if !allows(reqs, retries, r.ppm, r.floor) {
		return false
	}
	r.entry(h).retries++
	return true
}

// Success does nothing.
func (r *ProportionalSlotRatio) Success(budget.Kind) {}

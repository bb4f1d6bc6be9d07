package wild

import (
	"math/bits"
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// allows reports whether retries+1 fits in max(floor, ⌊ppm × reqs / 1e6⌋).
func allows(reqs, retries, ppm, floor int64) bool {
	if retries+1 <= floor {
		return true
	}
	hi, lo := bits.Mul64(uint64(reqs), uint64(ppm))
	q, _ := bits.Div64(hi, lo, 1_000_000)
	return uint64(retries+1) <= q
}

// ResetOnBackwardsRatio is a sliding-window ratio budget that starts afresh
// when its clock goes backwards (time handling: a reading earlier than the
// latest one forgets every request and retry in the window).
type ResetOnBackwardsRatio struct {
	ppm, floor, width, n int64
	clock                budget.Clock

	mu   sync.Mutex
	seen int64
	ring []struct{ slot, reqs, retries int64 }
	used []bool
}

// NewResetOnBackwardsRatio returns an empty budget of ppm parts per million.
func NewResetOnBackwardsRatio(ppm int64, window time.Duration, slots, floor int64, clock budget.Clock) *ResetOnBackwardsRatio {
	return &ResetOnBackwardsRatio{ppm: ppm, floor: floor, width: int64(window) / slots, n: slots, clock: clock,
		seen: int64(clock.Now()), ring: make([]struct{ slot, reqs, retries int64 }, slots), used: make([]bool, slots)}
}

// now reads the clock and returns the current slot number. r.mu is held.
func (r *ResetOnBackwardsRatio) now() int64 {
	t := int64(r.clock.Now())
	if t < r.seen { // the clock went back: what we counted is unreliable
		clear(r.used)
	}
	r.seen = t
	return floorDiv(t, r.width)
}

func (r *ResetOnBackwardsRatio) entry(h int64) int {
	i := int(floorMod(h, r.n))
	if !r.used[i] || r.ring[i].slot != h {
		r.ring[i] = struct{ slot, reqs, retries int64 }{slot: h}
		r.used[i] = true
	}
	return i
}

// Request counts a request.
func (r *ResetOnBackwardsRatio) Request() {
	r.mu.Lock()
	r.ring[r.entry(r.now())].reqs++
	r.mu.Unlock()
}

// Retry grants and counts a retry if the window allows it.
func (r *ResetOnBackwardsRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.now()
	var reqs, retries int64
	for i, e := range r.ring {
		if r.used[i] && uint64(h)-uint64(e.slot) < uint64(r.n) {
			reqs, retries = reqs+e.reqs, retries+e.retries
		}
	}
	if !allows(reqs, retries, r.ppm, r.floor) {
		return false
	}
	r.ring[r.entry(h)].retries++
	return true
}

// Success does nothing.
func (r *ResetOnBackwardsRatio) Success(budget.Kind) {}

// SlotBoundaryRatio is a ratio budget that keeps the start instant of its
// current slot and moves on only once the clock is more than one width past
// it (time handling: off by one nanosecond, the instant that begins a slot is
// counted in the slot before).
type SlotBoundaryRatio struct {
	ppm, floor, width int64
	clock             budget.Clock

	mu            sync.Mutex
	seen, start   int64 // latest reading; start of the current slot
	cur           int   // index of the current slot
	reqs, retries []int64
	totR, totT    int64 // totals over the window
}

// NewSlotBoundaryRatio returns an empty budget of ppm parts per million.
func NewSlotBoundaryRatio(ppm int64, window time.Duration, slots, floor int64, clock budget.Clock) *SlotBoundaryRatio {
	w := int64(window) / slots
	now := int64(clock.Now())
	return &SlotBoundaryRatio{ppm: ppm, floor: floor, width: w, clock: clock, seen: now, start: floorDiv(now, w) * w,
		reqs: make([]int64, slots), retries: make([]int64, slots)}
}

// roll moves the window up to the clock's reading. r.mu is held.
func (r *SlotBoundaryRatio) roll() {
	now := int64(r.clock.Now())
	if now <= r.seen {
		return
	}
	r.seen = now
	elapsed := uint64(now) - uint64(r.start)
	if elapsed <= uint64(r.width) {
		return // still in the current slot
	}
	k := elapsed / uint64(r.width)
	r.start += int64(k) * r.width
	if k >= uint64(len(r.reqs)) {
		clear(r.reqs)
		clear(r.retries)
		r.totR, r.totT = 0, 0
		return
	}
	for ; k > 0; k-- {
		r.cur = (r.cur + 1) % len(r.reqs)
		r.totR -= r.reqs[r.cur]
		r.totT -= r.retries[r.cur]
		r.reqs[r.cur], r.retries[r.cur] = 0, 0
	}
}

// Request counts a request.
func (r *SlotBoundaryRatio) Request() {
	r.mu.Lock()
	r.roll()
	r.reqs[r.cur]++
	r.totR++
	r.mu.Unlock()
}

// Retry grants and counts a retry if the window allows it.
func (r *SlotBoundaryRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roll()
	if !allows(r.totR, r.totT, r.ppm, r.floor) {
		return false
	}
	r.retries[r.cur]++
	r.totT++
	return true
}

// Success does nothing.
func (r *SlotBoundaryRatio) Success(budget.Kind) {}

// InclusiveWindowRatio is a ring of tagged slots that counts a slot as in
// the window while head − slot <= Slots (time handling: window membership
// with <= instead of <, so a slot exactly one window old still counts until
// its entry is reused).
type InclusiveWindowRatio struct {
	ppm, floor, width, n int64
	clock                budget.Clock

	mu   sync.Mutex
	seen int64
	tag  []int64
	reqs []int64
	rets []int64
}

// NewInclusiveWindowRatio returns an empty budget of ppm parts per million.
func NewInclusiveWindowRatio(ppm int64, window time.Duration, slots, floor int64, clock budget.Clock) *InclusiveWindowRatio {
	r := &InclusiveWindowRatio{ppm: ppm, floor: floor, width: int64(window) / slots, n: slots, clock: clock,
		seen: int64(clock.Now()), tag: make([]int64, slots), reqs: make([]int64, slots), rets: make([]int64, slots)}
	h := floorDiv(r.seen, r.width)
	for i := range r.tag {
		r.tag[i] = h - 2*slots // long gone
	}
	return r
}

func (r *InclusiveWindowRatio) head() int64 {
	if now := int64(r.clock.Now()); now > r.seen {
		r.seen = now
	}
	return floorDiv(r.seen, r.width)
}

func (r *InclusiveWindowRatio) slot(h int64) int {
	i := int(floorMod(h, r.n))
	if r.tag[i] != h {
		r.tag[i], r.reqs[i], r.rets[i] = h, 0, 0
	}
	return i
}

// Request counts a request.
func (r *InclusiveWindowRatio) Request() {
	r.mu.Lock()
	r.reqs[r.slot(r.head())]++
	r.mu.Unlock()
}

// Retry grants and counts a retry if the window allows it.
func (r *InclusiveWindowRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.head()
	var reqs, rets int64
	for i, s := range r.tag {
		if s <= h && h-s <= r.n {
			reqs, rets = reqs+r.reqs[i], rets+r.rets[i]
		}
	}
	if !allows(reqs, rets, r.ppm, r.floor) {
		return false
	}
	r.rets[r.slot(h)]++
	return true
}

// Success does nothing.
func (r *InclusiveWindowRatio) Success(budget.Kind) {}

// TruncatedSlotRatio is a ring of tagged slots whose slot number is
// now / width with Go's division (time handling: division truncates toward
// zero, so before instant 0 slot numbers are off by one and slot 0 is two
// widths long, [-width+1, width)).
type TruncatedSlotRatio struct {
	ppm, floor, width, n int64
	clock                budget.Clock

	mu   sync.Mutex
	seen int64
	ring []struct {
		live                bool
		slot, reqs, retries int64
	}
}

// NewTruncatedSlotRatio returns an empty budget of ppm parts per million.
func NewTruncatedSlotRatio(ppm int64, window time.Duration, slots, floor int64, clock budget.Clock) *TruncatedSlotRatio {
	r := &TruncatedSlotRatio{ppm: ppm, floor: floor, width: int64(window) / slots, n: slots, clock: clock, seen: int64(clock.Now())}
	r.ring = make([]struct {
		live                bool
		slot, reqs, retries int64
	}, slots)
	return r
}

func (r *TruncatedSlotRatio) head() int64 {
	if now := int64(r.clock.Now()); now > r.seen {
		r.seen = now
	}
	return r.seen / r.width
}

// Request counts a request.
func (r *TruncatedSlotRatio) Request() {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.head()
	e := &r.ring[(h%r.n+r.n)%r.n]
	if !e.live || e.slot != h {
		e.live, e.slot, e.reqs, e.retries = true, h, 0, 0
	}
	e.reqs++
}

// Retry grants and counts a retry if the window allows it.
func (r *TruncatedSlotRatio) Retry(k budget.Kind) bool {
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
	e := &r.ring[(h%r.n+r.n)%r.n]
	if !e.live || e.slot != h {
		e.live, e.slot, e.reqs, e.retries = true, h, 0, 0
	}
	e.retries++
	return true
}

// Success does nothing.
func (r *TruncatedSlotRatio) Success(budget.Kind) {}

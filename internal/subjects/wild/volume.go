package wild

import (
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// Uint16Ratio is a sliding-window ratio budget whose counters are uint16
// (volume: after 65536 requests in one window the total wraps to a small
// number, and the budget falls back to its floor under the heaviest load).
type Uint16Ratio struct {
	ppm, floor, width int64
	clock             budget.Clock

	mu            sync.Mutex
	seen, head    int64
	reqs, retries []uint16 // by slot number mod Slots
	totR, totT    uint16
}

// NewUint16Ratio returns an empty budget of ppm parts per million.
func NewUint16Ratio(ppm int64, window time.Duration, slots, floor int64, clock budget.Clock) *Uint16Ratio {
	w := int64(window) / slots
	now := int64(clock.Now())
	return &Uint16Ratio{ppm: ppm, floor: floor, width: w, clock: clock, seen: now, head: floorDiv(now, w),
		reqs: make([]uint16, slots), retries: make([]uint16, slots)}
}

// slide moves the window to the clock's reading and returns the current
// slot's index. r.mu is held.
func (r *Uint16Ratio) slide() int {
	n := int64(len(r.reqs))
	if now := int64(r.clock.Now()); now > r.seen {
		r.seen = now
		h := floorDiv(now, r.width)
		if uint64(h)-uint64(r.head) >= uint64(n) {
			clear(r.reqs)
			clear(r.retries)
			r.totR, r.totT, r.head = 0, 0, h
		}
		for r.head != h {
			r.head++
			i := floorMod(r.head, n)
			r.totR -= r.reqs[i]
			r.totT -= r.retries[i]
			r.reqs[i], r.retries[i] = 0, 0
		}
	}
	return int(floorMod(r.head, n))
}

// Request counts a request.
func (r *Uint16Ratio) Request() {
	r.mu.Lock()
	r.reqs[r.slide()]++
	r.totR++
	r.mu.Unlock()
}

// Retry grants and counts a retry if the window allows it.
func (r *Uint16Ratio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.slide()
	if !allows(int64(r.totR), int64(r.totT), r.ppm, r.floor) {
		return false
	}
	r.retries[i]++
	r.totT++
	return true
}

// Success does nothing.
func (r *Uint16Ratio) Success(budget.Kind) {}

// Product32Ratio is a ring of tagged slots that computes its allowance as
// uint32(requests) × uint32(ppm) / 1e6 (volume: the product wraps once it
// passes 2^32, at 42950 requests in the window for a ratio of 0.1).
type Product32Ratio struct {
	ppm, floor, width, n int64
	clock                budget.Clock

	mu    sync.Mutex
	seen  int64
	slots map[int64]*[2]int64 // slot number -> requests, retries
}

// NewProduct32Ratio returns an empty budget of ppm parts per million.
func NewProduct32Ratio(ppm int64, window time.Duration, slots, floor int64, clock budget.Clock) *Product32Ratio {
	return &Product32Ratio{ppm: ppm, floor: floor, width: int64(window) / slots, n: slots, clock: clock,
		seen: int64(clock.Now()), slots: map[int64]*[2]int64{}}
}

// current drops the slots that left the window and returns the current one.
func (r *Product32Ratio) current() *[2]int64 {
	if now := int64(r.clock.Now()); now > r.seen {
		r.seen = now
	}
	h := floorDiv(r.seen, r.width)
	for s := range r.slots {
		if uint64(h)-uint64(s) >= uint64(r.n) {
			delete(r.slots, s)
		}
	}
	c := r.slots[h]
	if c == nil {
		c = new([2]int64)
		r.slots[h] = c
	}
	return c
}

// Request counts a request.
func (r *Product32Ratio) Request() {
	r.mu.Lock()
	r.current()[0]++
	r.mu.Unlock()
}

// Retry grants and counts a retry if the window allows it.
func (r *Product32Ratio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.current()
	var reqs, retries int64
	for _, s := range r.slots {
		reqs, retries = reqs+s[0], retries+s[1]
	}
	allowed := int64(uint32(reqs) * uint32(r.ppm) / 1_000_000)
	if retries+1 > r.floor && retries+1 > allowed {
		return false
	}
	c[1]++
	return true
}

// Success does nothing.
func (r *Product32Ratio) Success(budget.Kind) {}

package designs

import (
	"time"
)

// slotRing is the sequential state of a sliding-window ratio budget, for
// the designs that guard it by some means of their own: the latest clock
// reading seen and a ring of slots, slot n at index n mod Slots. It is not
// safe for concurrent use.
type slotRing struct {
	seen time.Duration
	ring []ringSlot
}

// newSlotRing returns an empty ring on a clock that reads now.
func (c RatioConfig) newSlotRing(now time.Duration) slotRing {
	r := slotRing{seen: now, ring: make([]ringSlot, c.Slots)}
	h := c.slot(now)
	for i := range r.ring {
		// A slot number out of the window at h and at every later head.
		r.ring[i].n = h - c.Slots
	}
	return r
}

// observe takes the later of now and the latest reading seen as the latest
// seen, and returns its slot: the head of the window.
func (c RatioConfig) observe(r *slotRing, now time.Duration) int64 {
	r.seen = later(r.seen, now)
	return c.slot(r.seen)
}

// totals returns the requests and retries in the window whose head is h.
func (c RatioConfig) totals(r *slotRing, h int64) (reqs, retries int64) {
	for i := range r.ring {
		if s := &r.ring[i]; c.inWindow(s.n, h) {
			reqs += s.reqs
			retries += s.retries
		}
	}
	return reqs, retries
}

// head returns the entry of slot h, emptying an entry that holds an older
// slot.
func (c RatioConfig) head(r *slotRing, h int64) *ringSlot {
	s := &r.ring[floorMod(h, c.Slots)]
	if s.n != h {
		*s = ringSlot{n: h}
	}
	return s
}

// request counts a request at clock reading now.
func (c RatioConfig) request(r *slotRing, now time.Duration) {
	c.head(r, c.observe(r, now)).reqs++
}

// retry decides a retry at clock reading now, and counts it if granted.
func (c RatioConfig) retry(r *slotRing, now time.Duration) bool {
	h := c.observe(r, now)
	if !c.grants(c.totals(r, h)) {
		return false
	}
	c.head(r, h).retries++
	return true
}

// availableAt returns what Available reports at clock reading now; it
// changes nothing.
func (c RatioConfig) availableAt(r *slotRing, now time.Duration) float64 {
	return c.available(c.totals(r, c.slot(later(r.seen, now))))
}

package unseen

import (
	"time"

	"github.com/retrybudget/retrybudget/model"
)

// window is the sequential state of a sliding-window ratio budget
// (model.Ratio): Slots slots of Window/Slots each in a ring, with running
// totals. It does no locking of its own; each budget that uses it guards it
// in its own way.
type window struct {
	m       model.Ratio
	width   int64
	last    time.Duration // latest clock reading seen
	head    int64         // slot number of last
	slots   []slotCount
	reqs    int64 // requests in the window
	retries int64 // retries in the window
}

// slotCount is what one slot holds; n is its slot number.
type slotCount struct {
	n             int64
	reqs, retries int64
}

// newWindow returns an empty window on a clock reading now.
func newWindow(m model.Ratio, now time.Duration) *window {
	w := &window{m: m, width: int64(m.Window) / m.Slots, last: now, slots: make([]slotCount, m.Slots)}
	w.head = floorDiv(int64(now), w.width)
	for i := range w.slots {
		w.slots[i].n = w.head - m.Slots // in no window the head will reach
	}
	return w
}

// current slides the window to now (forward only) and returns the slot now
// falls in.
func (w *window) current(now time.Duration) *slotCount {
	if now > w.last {
		w.last = now
		w.advance(floorDiv(int64(now), w.width))
	}
	s := &w.slots[floorMod(w.head, int64(len(w.slots)))]
	if s.n != w.head {
		*s = slotCount{n: w.head}
	}
	return s
}

// advance moves the head to slot number n >= head, taking the slots that
// leave the window out of the totals.
func (w *window) advance(n int64) {
	gap := uint64(n) - uint64(w.head)
	size := uint64(len(w.slots))
	if gap >= size {
		w.reqs, w.retries = 0, 0
		w.head = n
		return
	}
	for ; gap > 0; gap-- {
		w.head++
		s := &w.slots[floorMod(w.head, int64(size))]
		if w.inWindow(s.n, w.head-1) {
			w.reqs -= s.reqs
			w.retries -= s.retries
		}
		*s = slotCount{n: w.head}
	}
}

// inWindow reports whether slot number n was in the window whose head was h.
func (w *window) inWindow(n, h int64) bool {
	return uint64(h)-uint64(n) < uint64(len(w.slots))
}

// request counts a request at now.
func (w *window) request(now time.Duration) {
	w.current(now).reqs++
	w.reqs++
}

// retry grants and counts a retry at now if the window allows one more.
func (w *window) retry(now time.Duration) bool {
	s := w.current(now)
	if w.retries >= ratioLimit(w.m, w.reqs) {
		return false
	}
	s.retries++
	w.retries++
	return true
}

// available returns, in retries, what the window would still grant at now,
// changing nothing.
func (w *window) available(now time.Duration) float64 {
	reqs, retries := w.reqs, w.retries
	if now > w.last {
		if h := floorDiv(int64(now), w.width); h != w.head {
			reqs, retries = 0, 0
			for _, s := range w.slots {
				if w.inWindow(s.n, h) && w.inWindow(s.n, w.head) {
					reqs += s.reqs
					retries += s.retries
				}
			}
		}
	}
	limit := ratioLimit(w.m, reqs)
	if retries >= limit {
		return 0
	}
	return float64(limit - retries)
}

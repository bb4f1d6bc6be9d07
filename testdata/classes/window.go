package classes

import (
	"time"

	"github.com/retrybudget/retrybudget/model"
)

// A window is the sliding window of a ratio budget: the requests and
// retries of the last size slots of width nanoseconds each, kept in a ring
// with running totals. It is not safe for concurrent use: each budget
// guards its own, or never changes one it has published (copy-on-write).
type window struct {
	width int64         // nanoseconds a slot
	size  int64         // slots in the window
	last  time.Duration // the latest clock reading seen
	head  int64         // the slot number of last: last / width, rounded down
	slots []windowSlot  // slot number n at index n mod size; only slots in the window hold counts
	reqs  int64         // requests in the window
	tries int64         // retries in the window
}

type windowSlot struct{ reqs, tries int64 }

// newWindow returns an empty window for m on a clock reading now.
func newWindow(m model.Ratio, now time.Duration) window {
	w := window{width: int64(m.Window) / m.Slots, size: m.Slots, last: now}
	w.head = floorDiv(int64(now), w.width)
	w.slots = make([]windowSlot, m.Slots)
	return w
}

// clone returns a copy of w that shares nothing with it.
func (w *window) clone() *window {
	c := *w
	c.slots = append([]windowSlot(nil), w.slots...)
	return &c
}

// observe slides the window to the later of now and the latest reading
// seen, and reports whether its head slot moved.
func (w *window) observe(now time.Duration) bool {
	if now <= w.last {
		return false
	}
	w.last = now
	n := floorDiv(int64(now), w.width)
	gap := uint64(n) - uint64(w.head) // n >= head: the true distance
	if gap == 0 {
		return false
	}
	if gap >= uint64(w.size) {
		clear(w.slots)
		w.reqs, w.tries = 0, 0
		w.head = n
		return true
	}
	for ; gap > 0; gap-- {
		w.head++
		s := &w.slots[floorMod(w.head, w.size)] // held slot head-size, which just left
		w.reqs -= s.reqs
		w.tries -= s.tries
		*s = windowSlot{}
	}
	return true
}

// addReq counts a request in the head slot.
func (w *window) addReq() {
	w.slots[floorMod(w.head, w.size)].reqs++
	w.reqs++
}

// addRetry counts a retry in the head slot.
func (w *window) addRetry() {
	w.slots[floorMod(w.head, w.size)].tries++
	w.tries++
}

// peek returns the requests and retries the window would hold at the
// instant now, changing nothing.
func (w *window) peek(now time.Duration) (reqs, tries int64) {
	if now <= w.last {
		return w.reqs, w.tries
	}
	n := floorDiv(int64(now), w.width)
	gap := uint64(n) - uint64(w.head)
	if gap >= uint64(w.size) {
		return 0, 0
	}
	reqs, tries = w.reqs, w.tries
	for i := uint64(1); i <= gap; i++ {
		s := w.slots[floorMod(w.head+int64(i), w.size)]
		reqs -= s.reqs
		tries -= s.tries
	}
	return reqs, tries
}

// slotOf returns the head slot the window would have at the instant now.
func (w *window) slotOf(now time.Duration) int64 {
	if now <= w.last {
		return w.head
	}
	return floorDiv(int64(now), w.width)
}

package lostupdates

import "time"

// ratioRing is the unsynchronized sliding window the ratio budgets of this
// package share: Slots slots of width nanoseconds in a ring, with running
// totals of the requests and retries in the window. Each budget brings its
// own locking.
type ratioRing struct {
	ppm   int64 // parts per million
	width int64 // slot width in nanoseconds
	floor int64

	last    time.Duration // latest clock reading seen
	head    int64         // slot number of last
	slots   []ratioSlot
	reqs    int64 // requests in the window
	retries int64 // retries in the window
}

type ratioSlot struct {
	n       int64
	reqs    int64
	retries int64
}

func newRatioRing(ppm int64, window time.Duration, slots int, floor int64, start time.Duration) ratioRing {
	width := int64(window) / int64(slots)
	return ratioRing{
		ppm:   ppm,
		width: width,
		floor: floor,
		last:  start,
		head:  floorDiv(int64(start), width),
		slots: make([]ratioSlot, slots),
	}
}

// rotate moves the window to the clock reading now, expiring the slots that
// have left it. A reading earlier than the latest one seen changes nothing.
func (r *ratioRing) rotate(now time.Duration) {
	if now > r.last {
		r.last = now
		r.advance(floorDiv(int64(now), r.width))
	}
}

// slot returns the head slot, renumbered if it still holds an old slot.
func (r *ratioRing) slot() *ratioSlot {
	s := &r.slots[floorMod(r.head, int64(len(r.slots)))]
	if s.n != r.head {
		*s = ratioSlot{n: r.head}
	}
	return s
}

// current rotates to now and returns the head slot.
func (r *ratioRing) current(now time.Duration) *ratioSlot {
	r.rotate(now)
	return r.slot()
}

func (r *ratioRing) advance(n int64) {
	gap := uint64(n) - uint64(r.head)
	size := uint64(len(r.slots))
	if gap >= size {
		r.reqs, r.retries = 0, 0
		r.head = n
		return
	}
	for ; gap > 0; gap-- {
		r.head++
		s := &r.slots[floorMod(r.head, int64(size))]
		if r.inWindow(s.n, r.head-1) {
			r.reqs -= s.reqs
			r.retries -= s.retries
		}
		*s = ratioSlot{n: r.head}
	}
}

func (r *ratioRing) inWindow(n, h int64) bool {
	return uint64(h)-uint64(n) < uint64(len(r.slots))
}

// allowance returns floor(ppm × reqs / 1e6) without overflow.
func (r *ratioRing) allowance(reqs int64) int64 {
	return reqs/1_000_000*r.ppm + reqs%1_000_000*r.ppm/1_000_000
}

// denies reports whether one more retry would break the window's limit.
func (r *ratioRing) denies() bool {
	return r.retries >= r.floor && r.retries >= r.allowance(r.reqs)
}

// left returns how many more retries the window grants now: the limit,
// max(floor, allowance), less the retries in the window, or 0.
func (r *ratioRing) left() int64 {
	limit := max(r.floor, r.allowance(r.reqs))
	return limit - min(r.retries, limit)
}

// available returns, without changing anything, how many more retries the
// window would grant at the clock reading now.
func (r *ratioRing) available(now time.Duration) float64 {
	reqs, retries := r.reqs, r.retries
	if now > r.last {
		if h := floorDiv(int64(now), r.width); h != r.head {
			reqs, retries = 0, 0
			for i := range r.slots {
				if s := &r.slots[i]; r.inWindow(s.n, h) && r.inWindow(s.n, r.head) {
					reqs += s.reqs
					retries += s.retries
				}
			}
		}
	}
	limit := max(r.floor, r.allowance(reqs))
	return float64(limit - min(retries, limit))
}

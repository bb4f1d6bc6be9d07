package designs

import (
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// PersistentRatio is a sliding-window ratio budget kept by read-copy-update
// on an atomic.Pointer to an immutable version: the latest clock reading
// seen and a persistent singly linked list of slots, newest first, that
// versions share. A call loads the version, reads the clock, builds the
// next version and installs it with a compare-and-swap, starting over if
// another call installed one first. A count in the newest slot replaces
// only the list's head node, sharing every older node; a count in a new
// slot pushes a node, copying the older nodes still in the window only
// when some node behind them has left it, so a list never holds more than
// Slots nodes and old versions are garbage once no reader holds them.
// A call that changes nothing (a denial in a slot already seen) swaps the
// version with itself, which validates that it was still installed.
//
// Linearizability: every call ends with a successful compare-and-swap of
// the version it loaded (possibly with itself). Versions are fresh
// allocations that the caller keeps alive, so there is no ABA: the swap
// succeeds only if no other version was installed since the load, so the
// installed version was the loaded one throughout, the clock read between
// them included. Each call is linearized at its clock read: its answer and
// next version are the model's step from that version at that reading,
// and the next version is installed before any other change.
type PersistentRatio struct {
	cfg   RatioConfig
	clock budget.Clock
	cur   atomic.Pointer[ratioVersion]
}

var _ budget.Budget = (*PersistentRatio)(nil)

// ratioVersion is one immutable state.
type ratioVersion struct {
	seen   time.Duration
	newest *slotNode // nil: nothing counted
}

// slotNode is one immutable slot with a count; older has a smaller slot
// number, or is nil.
type slotNode struct {
	n       int64
	reqs    int64
	retries int64
	older   *slotNode
}

// NewPersistentRatio returns an empty PersistentRatio on clock, which must
// be non-nil.
func NewPersistentRatio(cfg RatioConfig, clock budget.Clock) *PersistentRatio {
	r := &PersistentRatio{cfg: cfg, clock: clock}
	r.cur.Store(&ratioVersion{seen: clock.Now()})
	return r
}

// totals returns the requests and retries of list in the window whose
// newest slot is h. The list's slot numbers decrease, so the first node
// out of the window ends it.
func (r *PersistentRatio) totals(list *slotNode, h int64) (reqs, retries int64) {
	for x := list; x != nil && r.cfg.inWindow(x.n, h); x = x.older {
		reqs += x.reqs
		retries += x.retries
	}
	return reqs, retries
}

// trim returns list without its nodes out of the window at head h, sharing
// it whole when every node is in the window.
func (r *PersistentRatio) trim(list *slotNode, h int64) *slotNode {
	if list == nil || !r.cfg.inWindow(list.n, h) {
		return nil
	}
	x := list
	for x.older != nil && r.cfg.inWindow(x.older.n, h) {
		x = x.older
	}
	if x.older == nil {
		return list // all in the window
	}
	// Copy list up to and including x, ending the copy there.
	copyHead := &slotNode{n: list.n, reqs: list.reqs, retries: list.retries}
	last := copyHead
	for y := list; y != x; {
		y = y.older
		c := &slotNode{n: y.n, reqs: y.reqs, retries: y.retries}
		last.older = c
		last = c
	}
	return copyHead
}

// count returns v's list with reqs and retries added in slot h, the
// newest.
func (r *PersistentRatio) count(v *ratioVersion, h, reqs, retries int64) *slotNode {
	if l := v.newest; l != nil && l.n == h {
		return &slotNode{n: h, reqs: l.reqs + reqs, retries: l.retries + retries, older: l.older}
	}
	return &slotNode{n: h, reqs: reqs, retries: retries, older: r.trim(v.newest, h)}
}

// update installs the version f returns from the installed one and the
// clock's reading, and returns f's answer.
func (r *PersistentRatio) update(f func(v *ratioVersion, seen time.Duration, h int64) (*ratioVersion, bool)) bool {
	for {
		v := r.cur.Load()
		seen := later(v.seen, r.clock.Now())
		next, ok := f(v, seen, r.cfg.slot(seen))
		if r.cur.CompareAndSwap(v, next) {
			return ok
		}
	}
}

// Request counts a request in the current slot.
func (r *PersistentRatio) Request() {
	r.update(func(v *ratioVersion, seen time.Duration, h int64) (*ratioVersion, bool) {
		return &ratioVersion{seen: seen, newest: r.count(v, h, 1, 0)}, false
	})
}

// Retry reports whether one more retry keeps the window within its limit,
// and counts it if so. A kind that is not a retry kind is denied and
// counted nowhere, without reading the clock.
func (r *PersistentRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	return r.update(func(v *ratioVersion, seen time.Duration, h int64) (*ratioVersion, bool) {
		reqs, retries := r.totals(v.newest, h)
		if !r.cfg.grants(reqs, retries) {
			if seen == v.seen {
				return v, false // nothing changes; the swap validates v
			}
			return &ratioVersion{seen: seen, newest: v.newest}, false
		}
		return &ratioVersion{seen: seen, newest: r.count(v, h, 0, 1)}, true
	})
}

// Success does nothing: the budget recovers as its window slides.
func (r *PersistentRatio) Success(budget.Kind) {}

// Available returns how many more retries the window would grant as of the
// clock's reading now; it changes nothing.
func (r *PersistentRatio) Available() float64 {
	for {
		v := r.cur.Load()
		h := r.cfg.slot(later(v.seen, r.clock.Now()))
		reqs, retries := r.totals(v.newest, h)
		if r.cur.Load() == v {
			return r.cfg.available(reqs, retries)
		}
	}
}

package fromdocs

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// SeqModel is the rule SeqRatio follows: 12.5% of the requests of a 1.2 s
// window kept in 3 slots of 400 ms, and at least 4 retries.
var SeqModel = model.Ratio{PPM: 125_000, Window: 1200 * time.Millisecond, Slots: 3, Floor: 4}

type seqCell struct {
	n, reqs, retries atomic.Int64
}

// SeqRatio is a sliding-window ratio budget (model.Ratio) whose state is
// published under a sequence lock. Writers (Request, Retry) take mu, make
// the sequence odd, change the cells, and make it even again; Available
// reads without the mutex and retries until it saw one even sequence
// before and after its reads. Every field is an atomic, so the optimistic
// reads are not data races.
//
// Linearizability: Request and Retry hold mu for their whole duration and
// read the clock inside it, so they are totally ordered and each takes
// effect at one instant inside its critical section, on the reading it
// took there. Available changes nothing, and a read that overlapped a
// writer is thrown away, so what it returns is the state between two
// writers.
type SeqRatio struct {
	ppm, floor, reserve, width int64
	clock                      budget.Clock

	mu    sync.Mutex
	seq   atomic.Uint64
	seen  atomic.Int64
	cells []seqCell
}

// NewSeq returns an empty budget following m, on clock c.
func NewSeq(m model.Ratio, c budget.Clock) *SeqRatio {
	r := &SeqRatio{ppm: m.PPM, floor: m.Floor, reserve: m.Reserve, width: int64(m.Window) / m.Slots, clock: c,
		cells: make([]seqCell, m.Slots)}
	r.seen.Store(int64(c.Now()))
	return r
}

// sums returns the counts of the window whose head slot is h.
func (r *SeqRatio) sums(h int64) (reqs, retries int64) {
	for i := range r.cells {
		c := &r.cells[i]
		if uint64(h)-uint64(c.n.Load()) < uint64(len(r.cells)) {
			reqs += c.reqs.Load()
			retries += c.retries.Load()
		}
	}
	return reqs, retries
}

// writeLocked observes the clock and returns the head slot and its cell,
// renumbered if it held an older slot. mu must be held and seq odd.
func (r *SeqRatio) writeLocked() (int64, *seqCell) {
	seen, _ := observe(time.Duration(r.seen.Load()), r.clock.Now())
	r.seen.Store(int64(seen))
	h := floorDiv(int64(seen), r.width)
	c := &r.cells[floorMod(h, int64(len(r.cells)))]
	if c.n.Load() != h {
		c.n.Store(h)
		c.reqs.Store(0)
		c.retries.Store(0)
	}
	return h, c
}

// Request counts a request in the current slot.
func (r *SeqRatio) Request() {
	r.mu.Lock()
	r.seq.Add(1)
	_, c := r.writeLocked()
	c.reqs.Add(1)
	r.seq.Add(1)
	r.mu.Unlock()
}

// Retry grants and counts a retry when the window allows one more.
func (r *SeqRatio) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	r.mu.Lock()
	r.seq.Add(1)
	h, c := r.writeLocked()
	reqs, retries := r.sums(h)
	ok := ratioGrants(r.ppm, r.floor, r.reserve, reqs, retries)
	if ok {
		c.retries.Add(1)
	}
	r.seq.Add(1)
	r.mu.Unlock()
	return ok
}

// Success does nothing.
func (r *SeqRatio) Success(budget.Kind) {}

// Available returns how many more retries the window would grant now,
// read optimistically under the sequence lock. It changes nothing.
func (r *SeqRatio) Available() float64 {
	for {
		s1 := r.seq.Load()
		if s1&1 == 1 {
			runtime.Gosched()
			continue
		}
		seen, _ := observe(time.Duration(r.seen.Load()), r.clock.Now())
		reqs, retries := r.sums(floorDiv(int64(seen), r.width))
		if r.seq.Load() == s1 {
			return ratioLeft(r.ppm, r.floor, r.reserve, reqs, retries)
		}
	}
}

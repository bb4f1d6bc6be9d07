package classes

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// OddSeqlockRatio is a sliding-window ratio budget. Writers hold a mutex,
// change the window (a ring of slots) and then publish a snapshot of it,
// the head slot, the latest clock reading seen and the totals of requests
// and retries, in atomics under a sequence counter that they bump before
// and after publishing. Retry first tries a lock-free deny: it reads the
// counter, the snapshot and the counter again, and when the two readings of
// the counter agree, the clock is still in the snapshot's head slot and the
// snapshot's retries already use up max(Floor, ⌊PPM × requests / 1e6⌋), it
// denies without the lock.
//
// Class 3, ratio family (model.SRE(): 10% of the last 10 s in 10 slots, at
// least 3).
//
// Bug: the reader compares the two readings of the counter but never checks
// that the first is even, so a reader that runs entirely inside a write
// (the counter odd, and unchanged, throughout) accepts a half-published
// snapshot. The writer publishes the head, the clock and the requests before
// the retries. With 3 retries at instant 0 and the clock at 10 s (the whole
// window gone by):
//
//	g1: Request at 10 s: lock, the window slides (empty), 1 request; counter odd;
//	    publishes head = slot 10, last = 10 s, requests = 1
//	g2: Retry: counter odd, snapshot (head 10, 1 request, 3 retries), counter
//	    odd and the same → 3 retries use up max(3, 0) → denied
//	g1: publishes retries = 0; counter even; unlock
//
// In every order the retry finds an empty window (no retry in the last 10
// s) and the model grants it (an under-grant). The wrong answer needs g1
// preempted inside its publication (testHook point "seqlock.ratio.publish").
type OddSeqlockRatio struct {
	m     model.Ratio
	clock budget.Clock
	width int64

	mu sync.Mutex // serializes writers; guards w
	w  window

	seq   atomic.Uint64
	head  atomic.Int64
	last  atomic.Int64
	reqs  atomic.Int64
	tries atomic.Int64
}

// NewOddSeqlockRatio returns an empty budget with m's parameters reading
// clock.
func NewOddSeqlockRatio(m model.Ratio, clock budget.Clock) *OddSeqlockRatio {
	r := &OddSeqlockRatio{m: m, clock: clock, w: newWindow(m, clock.Now())}
	r.width = r.w.width
	r.publish()
	return r
}

// publish copies the window's snapshot to the atomics under the sequence
// counter. r.mu must be held.
func (r *OddSeqlockRatio) publish() {
	r.seq.Add(1)
	r.head.Store(r.w.head)
	r.last.Store(int64(r.w.last))
	r.reqs.Store(r.w.reqs)
	hook("seqlock.ratio.publish")
	r.tries.Store(r.w.tries)
	r.seq.Add(1)
}

// Request counts a request.
func (r *OddSeqlockRatio) Request() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.w.observe(r.clock.Now())
	r.w.addReq()
	r.publish()
}

// Retry grants and counts a retry while the window allows one more.
func (r *OddSeqlockRatio) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	now := r.clock.Now()
	v1 := r.seq.Load()
	head, last := r.head.Load(), time.Duration(r.last.Load())
	reqs, tries := r.reqs.Load(), r.tries.Load()
	if v2 := r.seq.Load(); v1 == v2 { // the first reading may be odd
		same := now <= last || floorDiv(int64(now), r.width) == head
		if same && tries+1 > ratioLimit(r.m, reqs) {
			return false
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	moved := r.w.observe(r.clock.Now())
	if r.w.tries+1 > ratioLimit(r.m, r.w.reqs) {
		if moved || r.w.last != time.Duration(r.last.Load()) {
			r.publish()
		}
		return false
	}
	r.w.addRetry()
	r.publish()
	return true
}

// Success does nothing.
func (r *OddSeqlockRatio) Success(budget.Kind) {}

// Available returns how many more retries the window would grant now.
func (r *OddSeqlockRatio) Available() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs, tries := r.w.peek(r.clock.Now())
	return ifAvailable(ratioLimit(r.m, reqs), tries)
}

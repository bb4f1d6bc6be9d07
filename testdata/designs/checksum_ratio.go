package designs

import (
	"fmt"
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// ChecksumRatio is a sliding-window ratio budget that distrusts its own
// memory: its ring of slots carries a checksum, kept up to date on every
// change, and every call, holding the budget's one sync.Mutex, first
// recomputes the checksum over the whole ring and panics if it differs
// from the one kept, then recounts every slot of the window from scratch.
// A ring of a hundred or more slots makes that several hundred loop
// iterations, about a microsecond, per call: slow-ish work, but bounded,
// and all of it under the one lock.
//
// The checksum of the ring is the sum (mod 2^64) of a mix of each entry's
// index, slot number and counts. A change to entry i subtracts the entry's
// old mix and adds its new one, so the kept checksum always equals the
// recomputed one unless memory was changed behind the budget's back.
//
// Linearizability: every call that touches the ring or reads the clock
// holds mu from before its clock read to after its last write, so calls
// are strictly serialized, and each is linearized at its clock read (a
// Success, which touches nothing, anywhere). The verification reads only,
// so it changes no answer: the budget answers as a plain mutex-guarded
// ring would. A retry of a kind that is not a retry kind takes no lock
// and changes nothing; it is linearized anywhere in its call.
type ChecksumRatio struct {
	cfg   RatioConfig
	clock budget.Clock

	mu   sync.Mutex
	seen time.Duration // latest clock reading seen
	ring []ringSlot    // slot n lives at index n mod Slots
	sum  uint64        // checksum of ring, kept up to date
}

var _ budget.Budget = (*ChecksumRatio)(nil)

// NewChecksumRatio returns an empty ChecksumRatio on clock, which must be
// non-nil.
func NewChecksumRatio(cfg RatioConfig, clock budget.Clock) *ChecksumRatio {
	r := &ChecksumRatio{cfg: cfg, clock: clock, ring: make([]ringSlot, cfg.Slots)}
	r.seen = clock.Now()
	h := cfg.slot(r.seen)
	for i := range r.ring {
		// A slot number out of the window at h and at every later head.
		r.ring[i].n = h - cfg.Slots
	}
	r.sum = r.checksum()
	return r
}

// mix scrambles one entry into 64 bits (a splitmix64 finalizer over its
// fields), so that a changed field changes the checksum.
func mix(i int, s ringSlot) uint64 {
	x := uint64(i)*0x9e3779b97f4a7c15 ^ uint64(s.n)
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x ^= uint64(s.reqs) * 0x94d049bb133111eb
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= uint64(s.retries) * 0xd6e8feb86659fd93
	return x ^ x>>31
}

// checksum recomputes the checksum of the ring. r.mu must be held.
func (r *ChecksumRatio) checksum() uint64 {
	var c uint64
	for i, s := range r.ring {
		c += mix(i, s)
	}
	return c
}

// enter locks, verifies the ring, observes the clock and returns the head
// slot with the requests and retries of its window, recounted.
func (r *ChecksumRatio) enter() (h, reqs, retries int64) {
	r.mu.Lock()
	if c := r.checksum(); c != r.sum {
		r.mu.Unlock()
		panic(fmt.Sprintf("designs: ChecksumRatio ring corrupted: checksum %#x, kept %#x", c, r.sum))
	}
	r.seen = later(r.seen, r.clock.Now())
	h = r.cfg.slot(r.seen)
	for i := range r.ring {
		if s := &r.ring[i]; r.cfg.inWindow(s.n, h) {
			reqs += s.reqs
			retries += s.retries
		}
	}
	return h, reqs, retries
}

// add adds reqs and retries to slot h, emptying an entry that holds an
// older slot, and keeps the checksum. r.mu must be held.
func (r *ChecksumRatio) add(h, reqs, retries int64) {
	i := int(floorMod(h, r.cfg.Slots))
	old := r.ring[i]
	s := old
	if s.n != h {
		s = ringSlot{n: h}
	}
	s.reqs += reqs
	s.retries += retries
	r.ring[i] = s
	r.sum += mix(i, s) - mix(i, old)
}

// Request counts a request in the current slot.
func (r *ChecksumRatio) Request() {
	h, _, _ := r.enter()
	r.add(h, 1, 0)
	r.mu.Unlock()
}

// Retry reports whether one more retry keeps the window within its limit,
// and counts it if so. A kind that is not a retry kind is denied and
// counted nowhere.
func (r *ChecksumRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	h, reqs, retries := r.enter()
	defer r.mu.Unlock()
	if !r.cfg.grants(reqs, retries) {
		return false
	}
	r.add(h, 0, 1)
	return true
}

// Success does nothing: the budget recovers as its window slides.
func (r *ChecksumRatio) Success(budget.Kind) {}

// Available returns how many more retries the window would grant as of the
// clock's reading now; it verifies the ring but changes nothing.
func (r *ChecksumRatio) Available() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.checksum(); c != r.sum {
		panic(fmt.Sprintf("designs: ChecksumRatio ring corrupted: checksum %#x, kept %#x", c, r.sum))
	}
	h := r.cfg.slot(later(r.seen, r.clock.Now()))
	var reqs, retries int64
	for i := range r.ring {
		if s := &r.ring[i]; r.cfg.inWindow(s.n, h) {
			reqs += s.reqs
			retries += s.retries
		}
	}
	return r.cfg.available(reqs, retries)
}

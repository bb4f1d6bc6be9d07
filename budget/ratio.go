package budget

import (
	"math"
	"sync"
	"time"
)

// ppm is the fixed-point scale of a Ratio's ratio: parts per million.
const ppm = 1_000_000

// maxRatioSlots bounds RatioConfig.Slots, and so the memory of one Ratio.
const maxRatioSlots = 1 << 20

// maxRatioReserve bounds RatioConfig.Reserve, as model.Ratio bounds its
// Reserve.
const maxRatioReserve = 1 << 40

// RatioConfig configures a [Ratio]. Start from [DefaultRatioConfig] and change
// what you need.
type RatioConfig struct {
	// Ratio is the share of requests that may be retried, in (0, 1]. It is
	// kept to six decimals (parts per million), and must be at least 1e-6.
	Ratio float64
	// Window is how far back requests and retries are counted; it must be
	// positive. It is split into Slots equal slots of Window/Slots each
	// (rounded down to the nanosecond); the window is Slots of them.
	Window time.Duration
	// Slots is how many slots the window is kept in, in [1, 1048576], and at
	// most Window in nanoseconds. More slots make the window slide more
	// smoothly; they cost memory but no time per call.
	Slots int
	// Floor is how many retries the window always allows, however few the
	// requests, so that low traffic can still retry: the allowance is
	// raised to it, as in the Google SRE book's budget and Envoy's
	// min_retry_concurrency. It must be >= 0.
	Floor int
	// Reserve is how many retries the window allows on top of the ratio's
	// share of requests: it is added to the allowance, where Floor is a
	// minimum the allowance is raised to, so 1000 requests at 10% allow
	// 100 + Reserve retries, and max(100, Floor) with a Floor. It is
	// Finagle's and tower's kind of minimum: their minRetriesPerSec
	// (tower's min_per_sec) × ttl in whole seconds, with Window their ttl
	// (ExampleRatio_finagle). It must be in [0, 2^40]; 0 adds nothing.
	Reserve int
	// Clock tells the time. Nil means NewMonotonicClock().
	Clock Clock
}

// DefaultRatioConfig returns the budget of the Google SRE book (chapter 21),
// with the floor Envoy uses: retries may be 10% of requests over a 10 s
// window kept in 10 slots, and at least 3 retries are always allowed.
func DefaultRatioConfig() RatioConfig {
	return RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Floor: 3}
}

// A Ratio is a retry budget that caps retries at a share of requests over a
// sliding window: a retry is granted while the retries granted in the window,
// this one included, are at most
// max(Floor, ⌊Ratio × requests in the window⌋ + Reserve).
//
// The window is kept in Slots slots of Window/Slots each, with running totals,
// so a call costs O(1) however many slots there are. A call that follows an
// idle gap of k slot widths first expires those k slots, so its cost is
// O(min(k, Slots)); over any stretch of time the work is O(calls + elapsed
// slot widths). Requests and retries expire a whole slot at a time: a count
// made in slot s leaves the window when slot s+Slots begins.
//
// Success does nothing: a Ratio recovers as the window slides, not through
// successes. Requests and retries are counted when they happen.
//
// The zero value denies every retry; use [NewRatio].
// Most callers want [Ratio.Retry].
//
// Ratio is safe for concurrent use by multiple goroutines.
type Ratio struct {
	// Read-only after construction.
	ratio   int64 // parts per million
	width   int64 // slot width in nanoseconds
	floor   int64
	reserve int64 // in [0, maxRatioReserve]
	clock   Clock

	mu      sync.Mutex
	last    time.Duration // latest Clock reading seen
	head    int64         // slot number (time / width) of last
	slots   []ratioSlot
	reqs    int64 // requests in the window
	retries int64 // retries in the window
	counts  counts
}

// ratioSlot holds the counts of one slot of time. Its number says which:
// slot number n covers [n*width, (n+1)*width) and lives at index n mod len.
type ratioSlot struct {
	n       int64
	reqs    int64
	retries int64
}

var _ Budget = (*Ratio)(nil)

// NewRatio returns an empty Ratio configured by c, or an error wrapping
// [ErrInvalidConfig] that names the first field out of range.
func NewRatio(c RatioConfig) (*Ratio, error) {
	if math.IsNaN(c.Ratio) || c.Ratio <= 0 || c.Ratio > 1 {
		return nil, configError("RatioConfig.Ratio", c.Ratio, "in (0, 1]")
	}
	ratio := int64(math.Round(c.Ratio * ppm))
	if ratio < 1 {
		return nil, configError("RatioConfig.Ratio", c.Ratio, "at least 0.000001")
	}
	if c.Window <= 0 {
		return nil, configError("RatioConfig.Window", c.Window, "> 0")
	}
	if c.Slots < 1 || c.Slots > maxRatioSlots {
		return nil, configError("RatioConfig.Slots", c.Slots, "in [1, 1048576]")
	}
	if int64(c.Slots) > int64(c.Window) {
		return nil, configError("RatioConfig.Slots", c.Slots, "at most Window in nanoseconds ("+itoa(int64(c.Window))+"), so that a slot is at least 1ns wide")
	}
	if c.Floor < 0 {
		return nil, configError("RatioConfig.Floor", c.Floor, ">= 0")
	}
	if c.Reserve < 0 || int64(c.Reserve) > maxRatioReserve {
		return nil, configError("RatioConfig.Reserve", c.Reserve, "in [0, 1099511627776] (2^40)")
	}
	r := &Ratio{
		ratio:   ratio,
		width:   int64(c.Window) / int64(c.Slots),
		floor:   int64(c.Floor),
		reserve: int64(c.Reserve),
		clock:   c.Clock,
		slots:   make([]ratioSlot, c.Slots),
	}
	if r.clock == nil {
		r.clock = NewMonotonicClock()
	}
	r.last = r.clock.Now()
	r.head = floorDiv(int64(r.last), r.width)
	// The slots start at slot number 0 with nothing counted: whether that
	// number is in the window or not, an empty slot adds nothing, and the
	// slot is renumbered when it is first used.
	return r, nil
}

// Request counts a request in the current slot.
func (r *Ratio) Request() {
	if r.slots == nil {
		return
	}
	r.mu.Lock()
	r.current(r.clock.Now()).reqs++
	r.reqs++
	r.mu.Unlock()
}

// Retry reports whether one more retry keeps the window within
// max(Floor, ⌊Ratio × requests⌋ + Reserve), and counts it if so. A kind
// that is not a retry kind is denied and counted nowhere.
func (r *Ratio) Retry(kind Kind) bool { return r.counts.count(r.retry(kind)) }

// Stats returns the retries granted and denied so far.
func (r *Ratio) Stats() Stats { return r.counts.stats() }

func (r *Ratio) retry(kind Kind) bool {
	if !kind.IsRetry() || r.slots == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.current(r.clock.Now())
	// retries - reserve cannot overflow: both are non-negative.
	if r.retries >= r.floor && r.retries-r.reserve >= r.allowance(r.reqs) {
		return false
	}
	s.retries++
	r.retries++
	return true
}

// Available returns how many more retries the window would grant now:
// max(Floor, ⌊Ratio × requests⌋ + Reserve) minus the retries in it, or 0,
// as of the clock's reading now. It changes nothing, so it takes time
// linear in Slots when the window has moved since the last Request or
// Retry. By the time it returns, other goroutines may have changed it; use
// it for metrics, never to decide a retry.
func (r *Ratio) Available() float64 {
	if r.slots == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs, retries := r.reqs, r.retries
	if now := r.clock.Now(); now > r.last {
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
	// The sum saturates at MaxInt64, which no count reaches.
	limit := max(r.floor, min(r.allowance(reqs), math.MaxInt64-r.reserve)+r.reserve)
	return float64(limit - min(retries, limit)) // none when retries fill the limit, or more
}

// Success does nothing: a Ratio recovers as its window slides.
func (r *Ratio) Success(Kind) {}

// allowance returns ⌊Ratio × reqs⌋, the ratio's share of reqs requests
// (model.Ratio's ⌊PPM × requests / 1e6⌋), without overflow.
func (r *Ratio) allowance(reqs int64) int64 {
	return reqs/ppm*r.ratio + reqs%ppm*r.ratio/ppm
}

// current slides the window to the clock reading now and returns the slot
// that now falls in. An instant earlier than the latest one seen counts as
// the latest one. r.mu must be held.
func (r *Ratio) current(now time.Duration) *ratioSlot {
	if now > r.last {
		r.last = now
		r.advance(floorDiv(int64(now), r.width))
	}
	s := &r.slots[floorMod(r.head, int64(len(r.slots)))]
	if s.n != r.head {
		*s = ratioSlot{n: r.head}
	}
	return s
}

// advance moves the head of the window to slot number n >= r.head, taking
// the counts of every slot that leaves the window out of the totals.
func (r *Ratio) advance(n int64) {
	// n and r.head may be far apart; unsigned subtraction gives the true
	// distance without overflow.
	gap := uint64(n) - uint64(r.head)
	size := uint64(len(r.slots))
	if gap >= size {
		// Every counted slot has left the window. The slots keep numbers
		// outside the new window, so they read as empty when reused.
		r.reqs, r.retries = 0, 0
		r.head = n
		return
	}
	for ; gap > 0; gap-- {
		r.head++
		s := &r.slots[floorMod(r.head, int64(size))]
		// The slot about to be reused held slot number head-size, if it
		// held anything counted.
		if r.inWindow(s.n, r.head-1) {
			r.reqs -= s.reqs
			r.retries -= s.retries
		}
		*s = ratioSlot{n: r.head}
	}
}

// inWindow reports whether slot number n was in the window whose head was h.
func (r *Ratio) inWindow(n, h int64) bool {
	d := uint64(h) - uint64(n)
	return d < uint64(len(r.slots))
}

// floorDiv returns a / b rounded towards negative infinity; b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// floorMod returns a mod b in [0, b); b > 0.
func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

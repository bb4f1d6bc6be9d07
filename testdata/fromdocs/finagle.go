package fromdocs

import (
	"sync"
	"time"

	"example.com/fromdocs/window"
	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// FinagleModel is the rule FinagleBudget follows: 20% of the requests of
// a 3 s window (6 slots of 500 ms), plus a reserve of 5 retries per window,
// and no floor.
var FinagleModel = model.Ratio{PPM: 200_000, Window: 3 * time.Second, Slots: 6, Reserve: 5}

// FinagleBudget is a Finagle-style retry budget: requests make deposits,
// retries withdrawals, each kept in a windowed counter of its own
// (window.Counter, a separate package, each counter with its own mutex),
// and a retry is allowed while the withdrawals of the window, this one
// included, stay within ⌊PPM × deposits / 1e6⌋ + Reserve (model.Ratio with
// Reserve > 0 and Floor 0).
//
// Linearizability: every Request and Retry holds mu for its whole
// duration, reads the clock inside it, and reads and updates both counters
// while still holding it. The counters are touched by nothing else (their
// own mutexes only make them safe on their own), so each call's effect
// happens at one instant, while it holds mu, on the clock reading it took
// there. The latest reading seen (seen) is kept under mu, so a clock that
// steps back counts as seen and no slot expires twice. Success does
// nothing and reads nothing.
type FinagleBudget struct {
	ppm, floor, reserve int64
	width               int64
	clock               budget.Clock

	mu          sync.Mutex
	seen        time.Duration
	deposits    *window.Counter
	withdrawals *window.Counter
}

// NewFinagle returns an empty budget following m, on clock c.
func NewFinagle(m model.Ratio, c budget.Clock) *FinagleBudget {
	return &FinagleBudget{
		ppm: m.PPM, floor: m.Floor, reserve: m.Reserve,
		width:       int64(m.Window) / m.Slots,
		clock:       c,
		seen:        c.Now(),
		deposits:    window.New(int(m.Slots)),
		withdrawals: window.New(int(m.Slots)),
	}
}

// headLocked observes the clock and returns the current slot number.
func (b *FinagleBudget) headLocked() int64 {
	b.seen, _ = observe(b.seen, b.clock.Now())
	return floorDiv(int64(b.seen), b.width)
}

// Request deposits one request in the current slot.
func (b *FinagleBudget) Request() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deposits.Add(b.headLocked(), 1)
}

// Retry withdraws a retry when the window allows one more.
func (b *FinagleBudget) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.headLocked()
	if !ratioGrants(b.ppm, b.floor, b.reserve, b.deposits.Sum(h), b.withdrawals.Sum(h)) {
		return false
	}
	b.withdrawals.Add(h, 1)
	return true
}

// Success does nothing: the budget recovers as its window slides.
func (b *FinagleBudget) Success(budget.Kind) {}

// Available returns how many more retries the window would grant now. It
// changes nothing.
func (b *FinagleBudget) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	seen, _ := observe(b.seen, b.clock.Now())
	h := floorDiv(int64(seen), b.width)
	return ratioLeft(b.ppm, b.floor, b.reserve, b.deposits.Sum(h), b.withdrawals.Sum(h))
}

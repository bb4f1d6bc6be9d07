package fromdocs

import (
	"sync"
	"time"

	"example.com/fromdocs/counter"
	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// MonitorModel is Finagle's RetryBudget with its defaults: 20% of the
// requests of a 10 s window, plus 10 retries a second for that window
// (100), and no floor.
var MonitorModel = model.Ratio{PPM: 200_000, Window: 10 * time.Second, Slots: 10, Reserve: 100}

// MonitorRatio is a monitor: every Request and Retry holds mu for the
// whole call, reads the clock once under it, and reads and changes the two
// counter.Windows (requests and retries) before letting go. Each window
// has a mutex of its own, which only makes it safe on its own.
//
// Linearizability: calls are serialized by mu and each takes effect at
// its clock reading, made under mu. The latest reading seen is kept under
// mu, so a clock stepped back counts as that reading, as the model's
// Observe says. Success does nothing.
type MonitorRatio struct {
	m     model.Ratio
	clock budget.Clock

	mu       sync.Mutex
	seen     time.Duration
	requests *counter.Window
	retries  *counter.Window
}

var _ budget.Budget = (*MonitorRatio)(nil)

// NewMonitorRatio returns an empty MonitorRatio following m on clock,
// whose reading now is the budget's start.
func NewMonitorRatio(m model.Ratio, c budget.Clock) *MonitorRatio {
	now := c.Now()
	return &MonitorRatio{m: m, clock: c, seen: now,
		requests: counter.New(m.Window, m.Slots, now),
		retries:  counter.New(m.Window, m.Slots, now)}
}

// now reads the clock, never going back behind the latest reading seen.
// mu must be held.
func (f *MonitorRatio) now() time.Duration {
	if n := f.clock.Now(); n > f.seen {
		f.seen = n
	}
	return f.seen
}

// Request counts a request in the current slot.
func (f *MonitorRatio) Request() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests.Add(f.now(), 1)
}

// Retry grants a retry of a retry kind while the window's retries, this
// one included, stay within ⌊PPM × requests / 1e6⌋ + Reserve (or Floor,
// if more), and counts it.
func (f *MonitorRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	allow := f.m.PPM*f.requests.Sum(now)/1_000_000 + f.m.Reserve
	if allow < f.m.Floor {
		allow = f.m.Floor
	}
	if f.retries.Sum(now)+1 > allow {
		return false
	}
	f.retries.Add(now, 1)
	return true
}

// Success does nothing: the window recovers as it slides.
func (f *MonitorRatio) Success(budget.Kind) {}

// SplitSeenRatio is MonitorRatio with its bug: it hands each counter the
// clock's raw reading, and each counter keeps its own latest one. When
// the clock steps back after a request moved the requests' counter on,
// the retries' counter is left behind, still holding retries the window
// has let go of, and denies retries the model grants.
type SplitSeenRatio struct {
	m        model.Ratio
	clock    budget.Clock
	mu       sync.Mutex
	requests *counter.Window
	retries  *counter.Window
}

// NewSplitSeenRatio returns an empty SplitSeenRatio following m on clock.
func NewSplitSeenRatio(m model.Ratio, c budget.Clock) *SplitSeenRatio {
	now := c.Now()
	return &SplitSeenRatio{m: m, clock: c,
		requests: counter.New(m.Window, m.Slots, now),
		retries:  counter.New(m.Window, m.Slots, now)}
}

// Request counts a request at the clock's reading.
func (f *SplitSeenRatio) Request() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests.Add(f.clock.Now(), 1)
}

// Retry is MonitorRatio's on the clock's raw reading.
func (f *SplitSeenRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	allow := max(f.m.PPM*f.requests.Sum(now)/1_000_000+f.m.Reserve, f.m.Floor)
	if f.retries.Sum(now)+1 > allow {
		return false
	}
	f.retries.Add(now, 1)
	return true
}

// Success does nothing.
func (f *SplitSeenRatio) Success(budget.Kind) {}

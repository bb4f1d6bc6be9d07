package budget

import (
	"sync/atomic"
	"time"
)

// A Clock reports the time elapsed since an origin of its own choosing.
//
// Budgets whose answers depend on time read their Clock on every call that
// changes their state. A Clock may be read from many goroutines at once, and
// it may go backwards: budgets treat an instant earlier than the latest one
// they have seen as the latest one, so no interval is ever refilled or
// expired twice.
type Clock interface {
	Now() time.Duration
}

// ClockFunc adapts a function to the [Clock] interface.
type ClockFunc func() time.Duration

// Now returns f().
func (f ClockFunc) Now() time.Duration { return f() }

// NewMonotonicClock returns a Clock that reads the monotonic wall clock and
// reports the time elapsed since NewMonotonicClock was called. It is the
// default Clock of every budget. Inside a testing/synctest bubble it follows
// the bubble's fake time.
func NewMonotonicClock() Clock {
	return monotonic{origin: time.Now()}
}

type monotonic struct{ origin time.Time }

func (m monotonic) Now() time.Duration { return time.Since(m.origin) }

// A ManualClock is a Clock that moves only when told to. Its zero value reads
// zero. Tests build a budget on a ManualClock and advance it by hand.
//
// ManualClock is safe for concurrent use by multiple goroutines.
type ManualClock struct {
	now atomic.Int64
}

var _ Clock = (*ManualClock)(nil)

// Now returns the clock's current reading.
func (c *ManualClock) Now() time.Duration { return time.Duration(c.now.Load()) }

// Advance moves the clock by d, which may be negative, and returns the new
// reading. It wraps around on overflow, as int64 arithmetic does.
func (c *ManualClock) Advance(d time.Duration) time.Duration {
	return time.Duration(c.now.Add(int64(d)))
}

// Set moves the clock to t.
func (c *ManualClock) Set(t time.Duration) { c.now.Store(int64(t)) }

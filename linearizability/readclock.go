package linearizability

import (
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/sched"
)

// readClock is the clock a recorded run gives the budget: the run's
// ManualClock, which also notes, for each client's call in progress, the
// stamps around the first and the last reading the call made on the
// client's own goroutine (Operation.ReadFrom and ReadTo). A reading made
// on any other goroutine (a budget's actor, a refill loop) is not noted.
//
// The stamps come from the run's counter, so they are ordered with the
// calls' and returns' stamps: the reading happened between them. They are
// taken outside any point the scheduler controls, so a controlled run's
// schedule means the same with them as without.
type readClock struct {
	clock *budget.ManualClock
	stamp *atomic.Int64
	who   []atomic.Uintptr // the goroutine of client i while it runs, or 0
	reads []readSpan       // client i's, written by its goroutine only
}

// readSpan is what one call's readings spanned: 0 and 0 before the first.
type readSpan struct {
	from, to int64
	_        [48]byte // one client's span per cache line
}

var _ budget.Clock = (*readClock)(nil)

func newReadClock(clock *budget.ManualClock, stamp *atomic.Int64, clients int) *readClock {
	return &readClock{clock: clock, stamp: stamp, who: make([]atomic.Uintptr, clients), reads: make([]readSpan, clients)}
}

// Now reads the ManualClock, noting the stamps around the reading if the
// calling goroutine is a client's.
func (c *readClock) Now() time.Duration {
	g := sched.Current()
	for i := range c.who {
		if c.who[i].Load() != g {
			continue
		}
		from := c.stamp.Add(1)
		now := c.clock.Now()
		r := &c.reads[i]
		if r.from == 0 {
			r.from = from
		}
		r.to = c.stamp.Add(1)
		return now
	}
	return c.clock.Now()
}

// enter marks the calling goroutine as client i's, until leave.
func (c *readClock) enter(i int) { c.who[i].Store(sched.Current()) }

// leave ends what enter began: the goroutine's identity may be reused by
// another once it returns.
func (c *readClock) leave(i int) { c.who[i].Store(0) }

// begin starts noting the readings of client i's next call.
func (c *readClock) begin(i int) { c.reads[i] = readSpan{} }

// end returns what client i's call read since begin.
func (c *readClock) end(i int) (from, to int64) { return c.reads[i].from, c.reads[i].to }

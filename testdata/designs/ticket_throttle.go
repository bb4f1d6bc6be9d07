package designs

import (
	"runtime"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// TicketThrottle is gRPC retry throttling (gRFC A6) guarded by a ticket
// lock built from two atomic counters, as in the Linux kernel's old
// spinlocks: a call takes the next ticket with one atomic add on next, then
// spins (yielding the processor) until serving reaches its ticket; it
// leaves by adding one to serving, which admits the next ticket in line.
// Callers are admitted strictly in the order they took tickets, so none
// starves.
//
// Linearizability: tickets are distinct (each is the value of one atomic
// add), and serving moves one ticket at a time, only by the holder of the
// ticket it equals, so at most one call is inside at once: it is a mutual
// exclusion lock. Each call reads and writes the count only inside, and is
// linearized there; the atomic add that leaves happens before the atomic
// load that sees the next ticket admitted, so the count's plain reads and
// writes are ordered (Go's memory model makes sync/atomic operations
// synchronizing, and the race detector knows it).
type TicketThrottle struct {
	cfg ThrottleConfig

	next    atomic.Uint64 // the next ticket to hand out
	_       [56]byte
	serving atomic.Uint64 // the ticket now admitted
	_       [56]byte

	tokens int64 // milli-tokens; guarded by the ticket lock
}

var _ budget.Budget = (*TicketThrottle)(nil)

// NewTicketThrottle returns a full TicketThrottle.
func NewTicketThrottle(cfg ThrottleConfig) *TicketThrottle {
	return &TicketThrottle{cfg: cfg, tokens: cfg.Max}
}

func (t *TicketThrottle) lock() {
	ticket := t.next.Add(1) - 1
	for t.serving.Load() != ticket {
		runtime.Gosched()
	}
}

func (t *TicketThrottle) unlock() { t.serving.Add(1) }

// Request does nothing.
func (t *TicketThrottle) Request() {}

// Retry takes one token for a retryable failure of kind k and reports
// whether more than half the maximum is left. A kind that is not a retry
// kind is denied and takes nothing.
func (t *TicketThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	t.lock()
	defer t.unlock()
	var ok bool
	t.tokens, ok = t.cfg.retry(t.tokens)
	return ok
}

// Success adds the ratio's tokens, up to the maximum, whatever the kind.
func (t *TicketThrottle) Success(budget.Kind) {
	t.lock()
	defer t.unlock()
	t.tokens = t.cfg.success(t.tokens)
}

// Available returns the token count.
func (t *TicketThrottle) Available() float64 {
	t.lock()
	defer t.unlock()
	return float64(t.tokens) / milli
}

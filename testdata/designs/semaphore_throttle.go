package designs

import (
	"context"

	"golang.org/x/sync/semaphore"

	"github.com/retrybudget/retrybudget/budget"
)

// SemaphoreThrottle is gRPC retry throttling (gRFC A6) whose token count
// is guarded not by a sync.Mutex but by a weighted semaphore of another
// module, golang.org/x/sync/semaphore, of size one, used as a mutex: a
// call acquires its one unit with Acquire(ctx, 1), reads and writes the
// count, and gives the unit back with Release(1). The context is
// context.Background(), which never ends, so Acquire only ever returns nil
// once it holds the unit.
//
// Linearizability: a Weighted of size 1 holds at most one unit out at a
// time, so at most one call is between its Acquire and its Release: the
// count is read and written only there, and the calls' critical sections
// are totally ordered. The semaphore's documentation makes a Release
// happen before the Acquire it lets through (it is built on a sync.Mutex
// and channels), so each critical section sees the last one's writes.
// Each call is linearized inside its critical section. A retry of a kind
// that is not a retry kind takes no unit and changes nothing.
type SemaphoreThrottle struct {
	cfg ThrottleConfig

	sem    *semaphore.Weighted // size 1: the lock of tokens
	tokens int64               // milli-tokens; guarded by sem
}

var _ budget.Budget = (*SemaphoreThrottle)(nil)

// NewSemaphoreThrottle returns a full SemaphoreThrottle.
func NewSemaphoreThrottle(cfg ThrottleConfig) *SemaphoreThrottle {
	return &SemaphoreThrottle{cfg: cfg, sem: semaphore.NewWeighted(1), tokens: cfg.Max}
}

// lock takes the semaphore's one unit. Acquire fails only when its
// context ends, and context.Background() never does.
func (t *SemaphoreThrottle) lock() {
	if err := t.sem.Acquire(context.Background(), 1); err != nil {
		panic("designs: semaphore.Acquire on a background context failed: " + err.Error())
	}
}

func (t *SemaphoreThrottle) unlock() { t.sem.Release(1) }

// Request does nothing.
func (t *SemaphoreThrottle) Request() {}

// Retry takes one token for a retryable failure of kind k and reports
// whether more than half the maximum is left. A kind that is not a retry
// kind is denied and takes nothing.
func (t *SemaphoreThrottle) Retry(k budget.Kind) bool {
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
func (t *SemaphoreThrottle) Success(budget.Kind) {
	t.lock()
	t.tokens = t.cfg.success(t.tokens)
	t.unlock()
}

// Available returns the token count.
func (t *SemaphoreThrottle) Available() float64 {
	t.lock()
	defer t.unlock()
	return float64(t.tokens) / milli
}

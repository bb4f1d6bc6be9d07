package designs

import (
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// CondBucket is a token bucket (refill optional) whose state is owned
// through a busy flag rather than a held mutex: the design of a "monitor"
// whose critical section may be long, built from a sync.Mutex and a
// sync.Cond.
//
// To touch the state a call takes mu, waits on the Cond while busy is set,
// sets busy and releases mu; it then reads the clock, refills, and decides,
// with no mutex held; it ends by taking mu again, clearing busy, releasing
// mu and signalling one waiter. A waiter woken while another call has
// barged in and set busy again waits again; that call's own release
// signals, so no wakeup is lost and no waiter sleeps while busy is clear.
//
// Linearizability: busy is a mutual-exclusion lock (set and cleared only
// under mu, set only when clear), so at most one call is between its
// acquire and its release, and the state and the clock reading are used
// only there. Every call is linearized at its clock read (or, for a call
// that reads no clock, anywhere in its owned section): the state cannot
// change between the read and the release, and the owned sections of two
// calls do not overlap, so their order is the order of the sections. The
// happens-before edges the race detector needs come from mu: a release's
// Unlock precedes the next acquire's Lock.
type CondBucket struct {
	cfg   BucketConfig
	clock budget.Clock

	mu   sync.Mutex
	free *sync.Cond // signalled when busy is cleared; L is &mu
	busy bool       // guarded by mu

	st bucketState // owned by the call that set busy
}

var _ budget.Budget = (*CondBucket)(nil)

// NewCondBucket returns a full CondBucket. clock is read when
// cfg.RefillPerSecond > 0, and must then be non-nil.
func NewCondBucket(cfg BucketConfig, clock budget.Clock) *CondBucket {
	b := &CondBucket{cfg: cfg, clock: clock}
	b.free = sync.NewCond(&b.mu)
	b.st = cfg.newBucketState(b.now())
	return b
}

// now reads the clock, or returns 0 for a bucket without refill, which
// never reads it.
func (b *CondBucket) now() time.Duration {
	if b.cfg.RefillPerSecond == 0 {
		return 0
	}
	return b.clock.Now()
}

// acquire waits until no other call owns the state, and owns it.
func (b *CondBucket) acquire() {
	b.mu.Lock()
	for b.busy {
		b.free.Wait()
	}
	b.busy = true
	b.mu.Unlock()
}

// release gives up the state and wakes one waiter.
func (b *CondBucket) release() {
	b.mu.Lock()
	b.busy = false
	b.mu.Unlock()
	b.free.Signal()
}

// Request does nothing: a first attempt is free.
func (b *CondBucket) Request() {}

// Retry withdraws the cost of a retry of kind k, after the refill due, and
// reports true, or reports false when the balance is short (the refill is
// kept either way). A kind that is not a retry kind is denied.
func (b *CondBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	b.acquire()
	defer b.release()
	var ok bool
	b.st, ok = b.cfg.retry(b.st, b.now(), k)
	return ok
}

// Success deposits the credit of a success of kind k, after the refill
// due, up to the capacity.
func (b *CondBucket) Success(k budget.Kind) {
	b.acquire()
	defer b.release()
	b.st = b.cfg.success(b.st, b.now(), k)
}

// Available returns the balance in tokens as of the clock's reading now,
// refill included; it changes nothing.
func (b *CondBucket) Available() float64 {
	b.acquire()
	defer b.release()
	return float64(b.cfg.observe(b.st, b.now()).tokens) / milli
}

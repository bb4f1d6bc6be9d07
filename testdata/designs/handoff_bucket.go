package designs

import (
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// HandoffBucket is a token bucket (refill optional) in which no caller
// touches the state: every call spawns a goroutine of its own that takes
// the mutex, reads the clock, applies the call and sends the answer on a
// one-slot channel, and the caller waits for that answer. The spawned
// goroutine's last step is that send, which never blocks, so no goroutine
// outlives its call by more than its own exit, and the budget needs no
// Close.
//
// Linearizability: the spawned goroutine runs entirely between the
// caller's go statement and the caller's receive of its answer, so its
// critical section (which ends before its send) lies inside the call's
// interval. Every critical section
// holds mu from its clock read to its write, so they are serialized by mu
// and each call is linearized at its goroutine's clock read. The channel
// send happens before the receive that completes it, so the caller sees
// the answer that goroutine computed. Request, and a retry of a kind that
// is not a retry kind, spawn nothing and change nothing.
type HandoffBucket struct {
	cfg   BucketConfig
	clock budget.Clock

	mu sync.Mutex
	st bucketState // guarded by mu
}

var _ budget.Budget = (*HandoffBucket)(nil)

// NewHandoffBucket returns a full HandoffBucket. clock is read when
// cfg.RefillPerSecond > 0, and must then be non-nil.
func NewHandoffBucket(cfg BucketConfig, clock budget.Clock) *HandoffBucket {
	b := &HandoffBucket{cfg: cfg, clock: clock}
	b.st = cfg.newBucketState(b.now())
	return b
}

func (b *HandoffBucket) now() time.Duration {
	if b.cfg.RefillPerSecond == 0 {
		return 0
	}
	return b.clock.Now()
}

// handoff runs f under mu on a goroutine of its own and returns its
// result.
func handoff[T any](mu *sync.Mutex, f func() T) T {
	answer := make(chan T, 1)
	go func() {
		mu.Lock()
		v := f()
		mu.Unlock()
		answer <- v
	}()
	return <-answer
}

// Request does nothing: a first attempt is free.
func (b *HandoffBucket) Request() {}

// Retry withdraws the cost of a retry of kind k, after the refill due, and
// reports true, or reports false when the balance is short (the refill is
// kept either way). A kind that is not a retry kind is denied.
func (b *HandoffBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	return handoff(&b.mu, func() bool {
		var ok bool
		b.st, ok = b.cfg.retry(b.st, b.now(), k)
		return ok
	})
}

// Success deposits the credit of a success of kind k, after the refill
// due, up to the capacity.
func (b *HandoffBucket) Success(k budget.Kind) {
	handoff(&b.mu, func() struct{} {
		b.st = b.cfg.success(b.st, b.now(), k)
		return struct{}{}
	})
}

// Available returns the balance in tokens as of the clock's reading now,
// refill included; it changes nothing.
func (b *HandoffBucket) Available() float64 {
	return handoff(&b.mu, func() float64 {
		return float64(b.cfg.observe(b.st, b.now()).tokens) / milli
	})
}

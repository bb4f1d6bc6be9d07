package designs

import (
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// WallClockBucket is a token bucket with refill that takes no budget.Clock:
// it reads the wall clock itself. The constructor takes time.Now() once as
// its origin, and every later reading is time.Since(origin), which Go
// measures on the monotonic clock, so it never goes back however the wall
// clock is set. The rest is a plain token bucket under a sync.Mutex, with
// the arithmetic of BucketConfig (the model's, exact in 128 bits).
// Readings are still passed through later, so even a monotonic reading
// that came out behind the latest seen would refill nothing twice.
//
// Linearizability: every call that reads the time holds mu from before its
// reading to after its write, so calls are serialized by mu and each is
// linearized at its reading of time.Now. Request, and a retry of a kind
// that is not a retry kind, touch nothing.
type WallClockBucket struct {
	cfg    BucketConfig
	origin time.Time // taken at construction; carries a monotonic reading

	mu sync.Mutex
	st bucketState // guarded by mu
}

var _ budget.Budget = (*WallClockBucket)(nil)

// NewWallClockBucket returns a full WallClockBucket whose clock starts now.
func NewWallClockBucket(cfg BucketConfig) *WallClockBucket {
	b := &WallClockBucket{cfg: cfg, origin: time.Now()}
	b.st = cfg.newBucketState(0)
	return b
}

// now returns the monotonic time since the bucket was built, or 0 for a
// bucket without refill, which never reads the time.
func (b *WallClockBucket) now() time.Duration {
	if b.cfg.RefillPerSecond == 0 {
		return 0
	}
	return time.Since(b.origin)
}

// Request does nothing: a first attempt is free.
func (b *WallClockBucket) Request() {}

// Retry withdraws the cost of a retry of kind k, after the refill due, and
// reports true, or reports false when the balance is short (the refill is
// kept either way). A kind that is not a retry kind is denied.
func (b *WallClockBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var ok bool
	b.st, ok = b.cfg.retry(b.st, b.now(), k)
	return ok
}

// Success deposits the credit of a success of kind k, after the refill
// due, up to the capacity.
func (b *WallClockBucket) Success(k budget.Kind) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.st = b.cfg.success(b.st, b.now(), k)
}

// Available returns the balance in tokens as of now, refill included; it
// changes nothing.
func (b *WallClockBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.cfg.observe(b.st, b.now()).tokens) / milli
}

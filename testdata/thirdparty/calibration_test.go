package thirdparty

import (
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// wallModelBucket is the calibration subject: XTimeRateModel itself, one
// call at a time under a mutex, on the wall clock read inside the lock
// (time.Since of the construction instant, monotonic). It is correct and
// linearizable by construction (every call is one Step of the model at
// the reading it takes under the lock), so any check it fails is the
// suite's.
type wallModelBucket struct {
	m      model.TokenBucket
	origin time.Time
	mu     sync.Mutex
	s      model.TokenBucketState
}

func newWallModelBucket(m model.TokenBucket) *wallModelBucket {
	return &wallModelBucket{m: m, origin: time.Now(), s: m.Init()}
}

func (b *wallModelBucket) step(op model.Op) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Since(b.origin)
	b.s, _ = b.m.Step(b.s, model.OpAdvance(now-b.s.Clock.Now))
	var ok bool
	b.s, ok = b.m.Step(b.s, op)
	return ok
}

func (b *wallModelBucket) Request() {}

func (b *wallModelBucket) Retry(k budget.Kind) bool { return k.IsRetry() && b.step(model.OpRetry(k)) }

func (b *wallModelBucket) Success(k budget.Kind) { b.step(model.OpSuccess(k)) }

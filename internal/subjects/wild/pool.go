package wild

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// WorkerPoolBucket is a token bucket served by two goroutines it starts:
// every call is a request on an unbuffered channel, and each worker loops
// on a select of the requests and a stop channel, then replies. A worker's
// Retry loads the balance, compares it with the cost, and then subtracts
// (concurrency: the check-then-act of CheckThenActBucket, but between the
// goroutines the budget starts itself, so that the two calls that race are
// each waiting on a reply while their workers do).
type WorkerPoolBucket struct {
	capacity, transient, throttled, bonus int64
	milli                                 atomic.Int64
	req                                   chan poolRequest
	stop                                  chan struct{}
	workers                               sync.WaitGroup
	closing                               sync.Once
}

type poolRequest struct {
	retry bool
	kind  budget.Kind
	reply chan bool
}

// NewWorkerPoolBucket returns a full bucket (milli-tokens) and starts its
// two workers; Close stops them.
func NewWorkerPoolBucket(capacity, transient, throttled, bonus int64) *WorkerPoolBucket {
	b := &WorkerPoolBucket{capacity: capacity, transient: transient, throttled: throttled, bonus: bonus,
		req: make(chan poolRequest), stop: make(chan struct{})}
	b.milli.Store(capacity)
	for range 2 {
		b.workers.Add(1)
		go b.serve()
	}
	return b
}

func (b *WorkerPoolBucket) serve() {
	defer b.workers.Done()
	for {
		select {
		case r := <-b.req:
			r.reply <- b.handle(r)
		case <-b.stop:
			return
		}
	}
}

func (b *WorkerPoolBucket) handle(r poolRequest) bool {
	if !r.retry {
		credit := b.bonus
		switch r.kind {
		case budget.Transient:
			credit = b.transient
		case budget.Throttled:
			credit = b.throttled
		}
		for {
			old := b.milli.Load()
			if b.milli.CompareAndSwap(old, min(old+credit, b.capacity)) {
				return false
			}
		}
	}
	if !r.kind.IsRetry() {
		return false
	}
	cost := b.transient
	if r.kind == budget.Throttled {
		cost = b.throttled
	}
	if b.milli.Load() < cost {
		return false
	}
	preempt()
	b.milli.Add(-cost)
	return true
}

func (b *WorkerPoolBucket) call(retry bool, k budget.Kind) bool {
	reply := make(chan bool)
	b.req <- poolRequest{retry: retry, kind: k, reply: reply}
	return <-reply
}

// Request does nothing.
func (b *WorkerPoolBucket) Request() {}

// Retry asks a worker to withdraw the cost of k if the balance covers it.
func (b *WorkerPoolBucket) Retry(k budget.Kind) bool { return b.call(true, k) }

// Success asks a worker to credit the refund or the bonus, up to capacity.
func (b *WorkerPoolBucket) Success(k budget.Kind) { b.call(false, k) }

// Available reports the balance in tokens.
func (b *WorkerPoolBucket) Available() float64 { return float64(b.milli.Load()) / 1000 }

// Close stops the workers and waits for them.
func (b *WorkerPoolBucket) Close() error {
	b.closing.Do(func() { close(b.stop) })
	b.workers.Wait()
	return nil
}

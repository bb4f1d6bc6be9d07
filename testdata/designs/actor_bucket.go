package designs

import (
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// ActorBucket is a token bucket (refill optional) whose state belongs to a
// worker goroutine: every call is a message sent to the worker on an
// unbuffered channel, and the worker answers on the message's own
// one-slot reply channel. Close shuts the worker down without a context or
// a finalizer: it closes a quit channel and waits for the worker to close
// done. Calls made after Close (or racing it and losing) find done closed
// and apply themselves to the same state under a mutex, so a late call
// neither hangs nor is lost.
//
// Linearizability: while the worker runs, only it touches the state and
// the clock, one message at a time, and it handles a message between the
// caller's send (which completes only when the worker has received it) and
// the caller's receive of the reply; each call is linearized at the
// worker's clock read for it. The worker closes done after its last
// access, and every fallback call starts after observing done closed and
// runs under mu, so fallback calls are ordered after every worker call and
// among themselves by mu. A caller's select sends its message to the
// worker or sees done, never both, so each call takes effect exactly once.
type ActorBucket struct {
	cfg   BucketConfig
	clock budget.Clock

	inbox chan actorMsg
	quit  chan struct{} // closed by Close
	done  chan struct{} // closed by the worker when it has stopped
	once  sync.Once

	mu sync.Mutex  // guards st once done is closed
	st bucketState // the worker's until done is closed
}

var _ budget.Budget = (*ActorBucket)(nil)

type actorOp uint8

const (
	actorRetry actorOp = iota
	actorSuccess
	actorAvailable
)

type actorMsg struct {
	op    actorOp
	kind  budget.Kind
	reply chan actorReply // one slot, so the worker never waits on it
}

type actorReply struct {
	granted bool
	tokens  int64
}

// NewActorBucket returns a full ActorBucket and starts its worker; Close
// stops it. clock is read when cfg.RefillPerSecond > 0, and must then be
// non-nil.
func NewActorBucket(cfg BucketConfig, clock budget.Clock) *ActorBucket {
	b := &ActorBucket{
		cfg:   cfg,
		clock: clock,
		inbox: make(chan actorMsg),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	b.st = cfg.newBucketState(b.now())
	go b.work()
	return b
}

func (b *ActorBucket) now() time.Duration {
	if b.cfg.RefillPerSecond == 0 {
		return 0
	}
	return b.clock.Now()
}

// work is the worker: it owns st until it closes done.
func (b *ActorBucket) work() {
	for {
		select {
		case m := <-b.inbox:
			m.reply <- b.apply(m)
		case <-b.quit:
			close(b.done)
			return
		}
	}
}

// apply runs one message on the state; its caller owns the state.
func (b *ActorBucket) apply(m actorMsg) actorReply {
	switch m.op {
	case actorRetry:
		var ok bool
		b.st, ok = b.cfg.retry(b.st, b.now(), m.kind)
		return actorReply{granted: ok}
	case actorSuccess:
		b.st = b.cfg.success(b.st, b.now(), m.kind)
	case actorAvailable:
		return actorReply{tokens: b.cfg.observe(b.st, b.now()).tokens}
	}
	return actorReply{}
}

// call hands m to the worker, or applies it under mu once the worker has
// stopped.
func (b *ActorBucket) call(op actorOp, k budget.Kind) actorReply {
	m := actorMsg{op: op, kind: k, reply: make(chan actorReply, 1)}
	select {
	case b.inbox <- m:
		return <-m.reply
	case <-b.done:
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.apply(m)
	}
}

// Request does nothing: a first attempt is free.
func (b *ActorBucket) Request() {}

// Retry withdraws the cost of a retry of kind k, after the refill due, and
// reports true, or reports false when the balance is short. A kind that is
// not a retry kind is denied without a message.
func (b *ActorBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	return b.call(actorRetry, k).granted
}

// Success deposits the credit of a success of kind k, after the refill
// due, up to the capacity.
func (b *ActorBucket) Success(k budget.Kind) { b.call(actorSuccess, k) }

// Available returns the balance in tokens as of the clock's reading now;
// it changes nothing.
func (b *ActorBucket) Available() float64 {
	return float64(b.call(actorAvailable, budget.FirstAttempt).tokens) / milli
}

// Close stops the worker and waits for it to stop. It is safe to call more
// than once, and the budget keeps working after it.
func (b *ActorBucket) Close() error {
	b.once.Do(func() { close(b.quit) })
	<-b.done
	return nil
}

package fromdocs

import (
	"math/bits"
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// ActorModel is the rule ActorBucket follows: 10 tokens, 1 per transient
// retry, 3 per throttled one, the cost back on a successful retry, 0.2 per
// successful first attempt, and a refill of 0.333 tokens a second.
var ActorModel = model.TokenBucket{Capacity: 10_000, TransientCost: 1_000, ThrottledCost: 3_000, SuccessBonus: 200, RefillPerSecond: 333}

type actorOp uint8

const (
	actorRetry actorOp = iota
	actorSuccess
	actorAvailable
)

type actorMsg struct {
	op    actorOp
	kind  budget.Kind
	reply chan actorReply // buffered, 1
}

type actorReply struct {
	ok      bool
	balance int64
}

// ActorBucket is a token bucket with refill (model.TokenBucket) whose state
// is owned by one goroutine: every call that reads or changes the state
// sends a message on an unbuffered channel and waits for the owner's
// reply. Close stops the owner and waits for it to exit; calls after
// Close deny and change nothing.
//
// Linearizability: the owner handles one message at a time, reading the
// clock while handling it, so the calls are totally ordered by the order
// in which the owner receives them. A message is received after its call
// began and replied to before it returns, so each call takes effect at one
// instant inside its own interval. Request and a Retry of a kind that is
// not a retry kind change nothing and never reach the owner.
type ActorBucket struct {
	m     model.TokenBucket
	clock budget.Clock

	msgs     chan actorMsg
	done     chan struct{}
	exited   chan struct{}
	stopOnce sync.Once

	// Owned by the goroutine run starts; never touched by callers.
	tokens, frac int64
	seen         time.Duration
}

// NewActor starts the owner of a full bucket following m, on clock c.
func NewActor(m model.TokenBucket, c budget.Clock) *ActorBucket {
	b := &ActorBucket{m: m, clock: c, msgs: make(chan actorMsg), done: make(chan struct{}), exited: make(chan struct{}),
		tokens: m.Capacity, seen: c.Now()}
	go b.run()
	return b
}

func (b *ActorBucket) run() {
	defer close(b.exited)
	for {
		select {
		case msg := <-b.msgs:
			msg.reply <- b.handle(msg)
		case <-b.done:
			return
		}
	}
}

func (b *ActorBucket) cost(k budget.Kind) int64 {
	if k == budget.Throttled {
		return b.m.ThrottledCost
	}
	return b.m.TransientCost
}

// refill returns the balance and fraction as of the clock reading now,
// and the new latest reading seen.
func (b *ActorBucket) refill(now time.Duration) (tokens, frac int64, seen time.Duration) {
	seen, elapsed := observe(b.seen, now)
	hi, lo := bits.Mul64(elapsed, uint64(b.m.RefillPerSecond))
	lo, carry := bits.Add64(lo, uint64(b.frac), 0)
	hi += carry
	if need := uint64(b.m.Capacity-b.tokens) * nsPerSecond; hi > 0 || lo >= need {
		return b.m.Capacity, 0, seen
	}
	return b.tokens + int64(lo/nsPerSecond), int64(lo % nsPerSecond), seen
}

func (b *ActorBucket) handle(msg actorMsg) actorReply {
	tokens, frac, seen := b.refill(b.clock.Now())
	if msg.op == actorAvailable {
		return actorReply{balance: tokens} // changes nothing
	}
	b.tokens, b.frac, b.seen = tokens, frac, seen
	switch msg.op {
	case actorRetry:
		if c := b.cost(msg.kind); b.tokens >= c {
			b.tokens -= c
			return actorReply{ok: true}
		}
	case actorSuccess:
		credit := b.m.SuccessBonus
		if msg.kind.IsRetry() && !b.m.NoRefund {
			credit = b.cost(msg.kind)
		}
		b.tokens += credit
		if b.tokens >= b.m.Capacity {
			b.tokens, b.frac = b.m.Capacity, 0
		}
	}
	return actorReply{}
}

// call sends msg to the owner and waits for its reply; after Close it
// returns the zero reply.
func (b *ActorBucket) call(op actorOp, kind budget.Kind) actorReply {
	msg := actorMsg{op: op, kind: kind, reply: make(chan actorReply, 1)}
	select {
	case b.msgs <- msg:
		return <-msg.reply // the owner replies to every message it takes
	case <-b.done:
		return actorReply{}
	}
}

// Request does nothing.
func (b *ActorBucket) Request() {}

// Retry withdraws the retry's cost when the balance covers it.
func (b *ActorBucket) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	return b.call(actorRetry, kind).ok
}

// Success deposits the refund or the bonus.
func (b *ActorBucket) Success(kind budget.Kind) { b.call(actorSuccess, kind) }

// Available returns the balance in tokens as of now. It changes nothing.
func (b *ActorBucket) Available() float64 {
	return float64(b.call(actorAvailable, 0).balance) / 1000
}

// Close stops the owner goroutine and waits for it to exit.
func (b *ActorBucket) Close() error {
	b.stopOnce.Do(func() { close(b.done) })
	<-b.exited
	return nil
}

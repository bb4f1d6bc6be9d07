package escapes

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// ActorSafeCloseModel is the rule ActorSafeClose follows while open: the
// refilling bucket of Tick64BucketModel (40 tokens, +1/s, 1 per retry,
// +0.1 per success, no refund).
var ActorSafeCloseModel = Tick64BucketModel

// ActorCloseRaceModel is the rule ActorCloseRace claims to follow: the same.
var ActorCloseRaceModel = ActorSafeCloseModel

type actorOp uint8

const (
	opRequest actorOp = iota
	opRetry
	opSuccess
)

type actorMsg struct {
	op    actorOp
	kind  budget.Kind
	reply chan bool // buffered: the actor never blocks on it
}

// actorState is what the actor goroutine owns: an exact bucket on an int64
// clock.
type actorState struct {
	t tokens
	f forward
}

func (s *actorState) apply(m actorMsg) bool {
	switch m.op {
	case opRetry:
		if !m.kind.IsRetry() {
			return false
		}
		s.t.earn(s.f.observe())
		return s.t.take(m.kind)
	case opSuccess:
		s.t.earn(s.f.observe())
		s.t.deposit(m.kind)
	}
	return false
}

// ---------------------------------------------------------------------------
// ActorCloseRace: the mutant.

// ActorCloseRace is an actor budget: one goroutine owns the bucket, and each
// call is a message on an unbuffered channel answered on a reply channel.
// Close stops the actor by closing the request channel; a call made after
// Close sees the closed flag and is denied without sending.
//
// BUG (deliberate): the flag check and the send are two steps. A call that
// has passed the check when Close runs (typically one blocked sending
// because the actor is busy with another call) panics with "send on closed
// channel". Calls before Close, and calls after it, behave.
type ActorCloseRace struct {
	reqs   chan actorMsg
	closed atomic.Bool
	exited chan struct{}
	once   sync.Once
}

var _ budget.Budget = (*ActorCloseRace)(nil)

// NewActorCloseRace starts an ActorCloseRace following m, on clock. Close
// stops its goroutine.
func NewActorCloseRace(m model.TokenBucket, clock budget.Clock) *ActorCloseRace {
	b := &ActorCloseRace{reqs: make(chan actorMsg), exited: make(chan struct{})}
	st := &actorState{t: newTokens(m), f: newForward(clock)}
	go func() {
		defer close(b.exited)
		for msg := range b.reqs {
			msg.reply <- st.apply(msg)
		}
	}()
	return b
}

func (b *ActorCloseRace) call(op actorOp, kind budget.Kind) bool {
	if b.closed.Load() {
		return false
	}
	msg := actorMsg{op: op, kind: kind, reply: make(chan bool, 1)}
	b.reqs <- msg
	return <-msg.reply
}

// Request does nothing to the bucket, but goes through the actor.
func (b *ActorCloseRace) Request() { b.call(opRequest, budget.FirstAttempt) }

// Retry asks the actor for a retry.
func (b *ActorCloseRace) Retry(kind budget.Kind) bool { return b.call(opRetry, kind) }

// Success tells the actor of a success.
func (b *ActorCloseRace) Success(kind budget.Kind) { b.call(opSuccess, kind) }

// Close stops the actor and waits for it. It is idempotent.
func (b *ActorCloseRace) Close() error {
	b.once.Do(func() {
		b.closed.Store(true)
		close(b.reqs)
	})
	<-b.exited
	return nil
}

// ---------------------------------------------------------------------------
// ActorSafeClose: the twin.

// ActorSafeClose is ActorCloseRace with Close done safely: the request
// channel is never closed. Close closes a done channel, which every call
// selects on beside its send, and waits for the actor to exit.
//
// While open it follows ActorSafeCloseModel (or the model.TokenBucket it is
// built with) exactly. A call that races Close, or follows it, returns
// promptly and never panics; it may or may not take effect: if the actor
// took its message it was applied and answered as the model says, otherwise
// a Retry is denied and nothing is counted. A message the actor has taken
// is always answered, so no call waits on an actor that has exited.
type ActorSafeClose struct {
	reqs   chan actorMsg
	done   chan struct{}
	exited chan struct{}
	once   sync.Once
}

var _ budget.Budget = (*ActorSafeClose)(nil)

// NewActorSafeClose starts an ActorSafeClose following m, on clock. Close
// stops its goroutine.
func NewActorSafeClose(m model.TokenBucket, clock budget.Clock) *ActorSafeClose {
	b := &ActorSafeClose{reqs: make(chan actorMsg), done: make(chan struct{}), exited: make(chan struct{})}
	st := &actorState{t: newTokens(m), f: newForward(clock)}
	go func() {
		defer close(b.exited)
		for {
			select {
			case msg := <-b.reqs:
				msg.reply <- st.apply(msg)
			case <-b.done:
				return
			}
		}
	}()
	return b
}

func (b *ActorSafeClose) call(op actorOp, kind budget.Kind) bool {
	msg := actorMsg{op: op, kind: kind, reply: make(chan bool, 1)}
	select {
	case b.reqs <- msg:
		return <-msg.reply // taken: the actor answers before it looks at done again
	case <-b.done:
		return false
	}
}

// Request does nothing to the bucket, but goes through the actor.
func (b *ActorSafeClose) Request() { b.call(opRequest, budget.FirstAttempt) }

// Retry asks the actor for a retry; denied once the budget is closed.
func (b *ActorSafeClose) Retry(kind budget.Kind) bool { return b.call(opRetry, kind) }

// Success tells the actor of a success; counted nowhere once closed.
func (b *ActorSafeClose) Success(kind budget.Kind) { b.call(opSuccess, kind) }

// Close stops the actor and waits for it to exit. It is idempotent and
// safe to call concurrently with any call.
func (b *ActorSafeClose) Close() error {
	b.once.Do(func() { close(b.done) })
	<-b.exited
	return nil
}

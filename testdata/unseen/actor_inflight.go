package unseen

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// ActorInFlight is a correct in-flight retry budget with Envoy's rule
// (model.EnvoyDefaults()) whose counts are owned by one goroutine: every
// call sends a message to it on an unbuffered channel and, for an answer,
// waits for the reply. The owner applies the messages one at a time, so
// each call takes effect at the instant the owner handles it, between the
// call's send and its return. Close stops the owner and waits for it to
// exit; a call after Close is denied or ignored.
type ActorInFlight struct {
	m    model.InFlight
	ops  chan actorOp
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

type actorOpKind uint8

const (
	actorRequest actorOpKind = iota
	actorRetry
	actorAttemptEnd
	actorCallEnd
	actorAvailable
)

type actorOp struct {
	kind  actorOpKind
	k     budget.Kind
	reply chan int64 // nil when the call needs no answer
}

// NewActorInFlight returns a budget following m (with the Envoy rule) with
// nothing in flight, and starts its owner goroutine; Close stops it.
func NewActorInFlight(m model.InFlight) *ActorInFlight {
	b := &ActorInFlight{m: m, ops: make(chan actorOp), quit: make(chan struct{}), done: make(chan struct{})}
	go b.own()
	return b
}

// own is the owner goroutine: it holds the counts and applies each message.
func (b *ActorInFlight) own() {
	defer close(b.done)
	var calls, retries int64
	for {
		select {
		case <-b.quit:
			return
		case op := <-b.ops:
			var out int64
			switch op.kind {
			case actorRequest:
				if calls < maxCount {
					calls++
				}
			case actorRetry:
				if op.k.IsRetry() && retries < envoyLimit(b.m, calls) {
					retries++
					out = 1
				}
			case actorAttemptEnd:
				if op.k.IsRetry() && retries > 0 {
					retries--
				}
			case actorCallEnd:
				if calls > 0 {
					calls--
				}
			case actorAvailable:
				out = max(envoyLimit(b.m, calls)-retries, 0)
			}
			if op.reply != nil {
				op.reply <- out
			}
		}
	}
}

// call sends op to the owner and returns its answer, or 0 once closed.
func (b *ActorInFlight) call(kind actorOpKind, k budget.Kind, answer bool) int64 {
	op := actorOp{kind: kind, k: k}
	if answer {
		op.reply = make(chan int64, 1)
	}
	select {
	case b.ops <- op:
	case <-b.quit:
		return 0
	}
	if !answer {
		return 0
	}
	return <-op.reply
}

// Request counts a call in flight.
func (b *ActorInFlight) Request() { b.call(actorRequest, 0, false) }

// Retry grants a retry while the rule admits one more in flight.
func (b *ActorInFlight) Retry(k budget.Kind) bool { return b.call(actorRetry, k, true) == 1 }

// Success does nothing.
func (b *ActorInFlight) Success(budget.Kind) {}

// AttemptEnd ends a retry in flight.
func (b *ActorInFlight) AttemptEnd(k budget.Kind) { b.call(actorAttemptEnd, k, false) }

// CallEnd ends a call in flight.
func (b *ActorInFlight) CallEnd() { b.call(actorCallEnd, 0, false) }

// Available returns how many more retries the rule would grant now.
func (b *ActorInFlight) Available() float64 { return float64(b.call(actorAvailable, 0, true)) }

// Close stops the owner goroutine and waits for it to exit.
func (b *ActorInFlight) Close() error {
	b.once.Do(func() { close(b.quit) })
	<-b.done
	return nil
}

package zoo

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
)

type throttleOp uint8

const (
	opRetry throttleOp = iota
	opSuccess
	opBalance
)

type throttleReq struct {
	op    throttleOp
	reply chan int64 // for opRetry: 1 granted / 0 denied; for opBalance: tokens
}

// ActorThrottle is gRPC retry throttling (gRFC A6) whose state is owned by
// one goroutine; the methods send it requests over a channel. Close stops
// the goroutine and waits for it; calls after Close deny retries and record
// nothing.
type ActorThrottle struct {
	reqs    chan throttleReq
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
	replies sync.Pool
}

// NewActorThrottle starts the owning goroutine with the count at max
// (milli-tokens); each success adds ratio.
func NewActorThrottle(max, ratio int64) *ActorThrottle {
	a := &ActorThrottle{
		reqs:    make(chan throttleReq),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	a.replies.New = func() any { return make(chan int64, 1) }
	go a.loop(max, ratio)
	return a
}

func (a *ActorThrottle) loop(max, ratio int64) {
	defer close(a.stopped)
	tokens := max
	for {
		select {
		case <-a.done:
			return
		case r := <-a.reqs:
			switch r.op {
			case opRetry:
				tokens = tokens - 1000
				if tokens < 0 {
					tokens = 0
				}
				if tokens*2 > max {
					r.reply <- 1
				} else {
					r.reply <- 0
				}
			case opSuccess:
				tokens += ratio
				if tokens > max {
					tokens = max
				}
				r.reply <- 0
			case opBalance:
				r.reply <- tokens
			}
		}
	}
}

// call sends op to the owner and waits for its answer; ok is false after Close.
func (a *ActorThrottle) call(op throttleOp) (v int64, ok bool) {
	ch := a.replies.Get().(chan int64)
	select {
	case a.reqs <- throttleReq{op: op, reply: ch}:
		v = <-ch // the owner always replies to a request it has taken
		a.replies.Put(ch)
		return v, true
	case <-a.done:
		return 0, false
	}
}

func (a *ActorThrottle) Request() {}

func (a *ActorThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	v, ok := a.call(opRetry)
	return ok && v == 1
}

// Success records a success of any kind: gRFC A6 credits every success.
func (a *ActorThrottle) Success(budget.Kind) { a.call(opSuccess) }

// Available returns the count in tokens.
func (a *ActorThrottle) Available() float64 {
	v, _ := a.call(opBalance)
	return float64(v) / 1000
}

// Close stops the owning goroutine and waits until it has returned.
func (a *ActorThrottle) Close() error {
	a.once.Do(func() { close(a.done) })
	<-a.stopped
	return nil
}

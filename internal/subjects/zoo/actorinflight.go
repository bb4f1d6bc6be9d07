package zoo

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
)

// ActorInFlight is Envoy's retry_budget whose counts are owned by one
// goroutine. Each operation has a channel of its own and the owner selects
// over them. The ends and Request are handed over on unbuffered channels
// and not answered: the owner applies each before it takes the next
// message, so the handover is the instant it happens. Retry and Available
// send a reply channel and wait. Close stops the goroutine and waits for
// it; after Close, retries are denied and nothing is recorded.
type ActorInFlight struct {
	requests    chan struct{}
	callEnds    chan struct{}
	attemptEnds chan struct{}
	retries     chan chan bool
	balances    chan chan int64

	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
	bools   sync.Pool
	ints    sync.Pool
}

// NewActorInFlight starts the owner with nothing in flight; ppm is the
// share of the calls in flight that may be retries, in parts per million.
func NewActorInFlight(ppm, minConcurrency int64) *ActorInFlight {
	a := &ActorInFlight{
		requests:    make(chan struct{}),
		callEnds:    make(chan struct{}),
		attemptEnds: make(chan struct{}),
		retries:     make(chan chan bool),
		balances:    make(chan chan int64),
		done:        make(chan struct{}),
		stopped:     make(chan struct{}),
	}
	a.bools.New = func() any { return make(chan bool, 1) }
	a.ints.New = func() any { return make(chan int64, 1) }
	go a.own(ppm, minConcurrency)
	return a
}

func (a *ActorInFlight) own(ppm, minConc int64) {
	defer close(a.stopped)
	var calls, active int64
	allowed := func() int64 { return min(max(minConc, ppm*calls/1_000_000), inflightMax) }
	for {
		select {
		case <-a.done:
			return
		case <-a.requests:
			if calls < inflightMax {
				calls++
			}
		case <-a.callEnds:
			if calls > 0 {
				calls--
			}
		case <-a.attemptEnds:
			if active > 0 {
				active--
			}
		case reply := <-a.retries:
			ok := active < allowed()
			if ok {
				active++
			}
			reply <- ok
		case reply := <-a.balances:
			reply <- max(allowed()-active, 0)
		}
	}
}

// tell hands the owner a message that needs no answer.
func (a *ActorInFlight) tell(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	case <-a.done:
	}
}

func (a *ActorInFlight) Request() { a.tell(a.requests) }

func (a *ActorInFlight) CallEnd() { a.tell(a.callEnds) }

// AttemptEnd ends a retry in flight; the first attempt's end changes nothing.
func (a *ActorInFlight) AttemptEnd(k budget.Kind) {
	if k.IsRetry() {
		a.tell(a.attemptEnds)
	}
}

func (a *ActorInFlight) Success(budget.Kind) {}

func (a *ActorInFlight) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	reply := a.bools.Get().(chan bool)
	select {
	case a.retries <- reply:
		ok := <-reply // the owner answers every request it takes
		a.bools.Put(reply)
		return ok
	case <-a.done:
		return false
	}
}

// Available returns how many more retries would be granted now.
func (a *ActorInFlight) Available() float64 {
	reply := a.ints.Get().(chan int64)
	select {
	case a.balances <- reply:
		n := <-reply
		a.ints.Put(reply)
		return float64(n)
	case <-a.done:
		return 0
	}
}

// Close stops the owning goroutine and waits until it has returned.
func (a *ActorInFlight) Close() error {
	a.once.Do(func() { close(a.done) })
	<-a.stopped
	return nil
}

package controltest

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/yield"
)

// Pool serves its calls from goroutines of its own, started by its
// constructor: each call is a request on an unbuffered channel and a
// reply on another, and each worker loops on a select of the requests and
// a stop channel. With one worker the calls are serialized and the pool is
// correct; with two and CheckThenAct set, the workers' grants race with
// each other, and only a scheduler that controls the budget's own
// goroutines can put a switch between a worker's load and its add.
type Pool struct {
	m            model.TokenBucket
	checkThenAct bool
	tokens       atomic.Int64
	req          chan request
	stop         chan struct{}
}

type request struct {
	retry bool
	kind  budget.Kind
	reply chan bool
}

// NewPool returns a full Pool for m, with the given number of workers.
func NewPool(m model.TokenBucket, workers int, checkThenAct bool) *Pool {
	p := &Pool{m: m, checkThenAct: checkThenAct, req: make(chan request), stop: make(chan struct{})}
	p.tokens.Store(m.Capacity)
	for range workers {
		yield.Hook.Go(p.serve)
	}
	return p
}

func (p *Pool) serve() {
	for {
		switch c0, c1 := yield.R(p.req), yield.R(p.stop); yield.Hook.Select(false, c0, c1) {
		case 0:
			r := c0.V
			yield.Send(r.reply, p.handle(r))
		case 1:
			return
		}
	}
}

func (p *Pool) handle(r request) bool {
	if !r.retry {
		refund(&p.tokens, p.m, r.kind)
		return false
	}
	if !r.kind.IsRetry() {
		return false
	}
	c := cost(p.m, r.kind)
	if p.checkThenAct {
		if yield.P(&p.tokens).Load() < c {
			return false
		}
		yield.P(&p.tokens).Add(-c)
		return true
	}
	for {
		t := yield.P(&p.tokens).Load()
		if t < c {
			return false
		}
		if yield.P(&p.tokens).CompareAndSwap(t, t-c) {
			return true
		}
	}
}

func (p *Pool) call(retry bool, k budget.Kind) bool {
	reply := make(chan bool)
	yield.Send(p.req, request{retry: retry, kind: k, reply: reply})
	return yield.Recv(reply)
}

func (p *Pool) Request()                 {}
func (p *Pool) Retry(k budget.Kind) bool { return p.call(true, k) }
func (p *Pool) Success(k budget.Kind)    { p.call(false, k) }

// Close stops the workers.
func (p *Pool) Close() error {
	yield.Close(p.stop)
	return nil
}

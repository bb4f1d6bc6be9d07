package linearizability

import (
	"context"
	"sync"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/sched"
	"github.com/retrybudget/retrybudget/model"
)

// busyBucket is a correct token bucket that does bounded work under its
// mutex on every call: a recount of a ring, each read a yield point, as
// the rewrite makes it.
type busyBucket struct {
	mu     sync.Mutex
	tokens int64
	ring   [64]int64
}

func (b *busyBucket) recount() {
	var s int64
	for i := range b.ring {
		s += sched.P(b.ring[i])
	}
	_ = s
}

func (b *busyBucket) Request() {}

func (b *busyBucket) Retry(k budget.Kind) bool {
	if k != budget.Transient && k != budget.Throttled {
		return false
	}
	sched.Hook.M(&b.mu).Lock()
	defer sched.Hook.M(&b.mu).Unlock()
	b.recount()
	if b.tokens < 1000 {
		return false
	}
	b.tokens -= 1000
	return true
}

func (b *busyBucket) Success(budget.Kind) {
	sched.Hook.M(&b.mu).Lock()
	defer sched.Hook.M(&b.mu).Unlock()
	b.recount()
}

// A run that passes its step bound because its calls do much work is not
// a livelock: its calls are waited for and its history read, as a free
// run's.
func TestStepBoundIsNotALivelock(t *testing.T) {
	m := model.TokenBucket{Capacity: 5_000, TransientCost: 1_000, ThrottledCost: 1_000, NoRefund: true}
	var g [][]model.Op
	for range 3 {
		var ops []model.Op
		for range 4 {
			ops = append(ops, model.OpRetry(model.Transient), model.OpSuccess(model.Transient))
		}
		g = append(g, ops)
	}
	s := Scenario{Goroutines: g, Control: &sched.Options{Seed: 1, Strategy: sched.Walk(), MaxSteps: 40}}
	h, rep, err := recordControlled(context.Background(), s, func(budget.Clock) budget.Budget { return &busyBucket{tokens: 5_000} })
	if err != nil {
		t.Fatalf("a run of bounded work past its step bound failed: %v", err)
	}
	if !rep.Exhausted || !rep.Free {
		t.Fatalf("the run did not reach its step bound of 40 (%d steps): the test proves nothing", len(rep.Options.Schedule))
	}
	if len(h) != 24 {
		t.Fatalf("the history holds %d operations, want all 24", len(h))
	}
	if res := Check(m, h, 0); res.Verdict != Linearizable {
		t.Fatalf("the history of a correct bucket: %v", res.Explain())
	}
}

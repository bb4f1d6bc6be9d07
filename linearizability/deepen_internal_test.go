package linearizability

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/sched"
	"github.com/retrybudget/retrybudget/model"
)

// fallbackBucket is a bucket of whole tokens (4, one a retry, refunded on
// a success of a retry) that calls the yield hooks by hand, as rewritten
// code would: a call tries a compare-and-swap twice, then takes a mutex
// and finishes there. With store set, the slow path writes with a plain
// Store, which a fast path's swap between its read and its write is lost
// to; the call must be preempted once in each fast attempt and once in
// the slow path for that: three preemptions inside one call.
type fallbackBucket struct {
	n     atomic.Int64
	mu    sync.Mutex
	store bool
}

func newFallbackBucket(store bool) *fallbackBucket {
	b := &fallbackBucket{store: store}
	b.n.Store(4)
	return b
}

func (b *fallbackBucket) update(delta int64) bool {
	next := func(v int64) (int64, bool) {
		if v+delta < 0 {
			return v, false
		}
		return min(4, v+delta), true
	}
	for range 2 {
		v := sched.P(&b.n).Load()
		n, ok := next(v)
		if !ok || n == v {
			return ok
		}
		if sched.P(&b.n).CompareAndSwap(v, n) {
			return true
		}
	}
	sched.Hook.M(&b.mu).Lock()
	defer sched.Hook.M(&b.mu).Unlock()
	for {
		v := sched.P(&b.n).Load()
		n, ok := next(v)
		if !ok || n == v {
			return ok
		}
		if b.store {
			sched.P(&b.n).Store(n)
			return true
		}
		if sched.P(&b.n).CompareAndSwap(v, n) {
			return true
		}
	}
}

func (b *fallbackBucket) Request() {}
func (b *fallbackBucket) Retry(k budget.Kind) bool {
	return k.IsRetry() && b.update(-1)
}
func (b *fallbackBucket) Success(k budget.Kind) {
	if k.IsRetry() {
		b.update(1)
	}
}

// The exhaustive stage's deepening: a bug that needs three preemptions
// inside one call is missed by every schedule with at most two (counted
// at call boundaries or not) and found with three inside calls, on the
// scenario made for it; the correct twin passes at three.
func TestDeepeningFindsThreePreemptionsInsideACall(t *testing.T) {
	m := model.TokenBucket{Capacity: 4_000, TransientCost: 1_000, ThrottledCost: 1_000}
	var s Scenario
	for _, ns := range (&searcher[model.TokenBucketState]{tg: Target[model.TokenBucketState]{Model: m}}).exhaustScenarios() {
		if ns.name == threeUpdates {
			s = ns.s
		}
	}
	if s.Goroutines == nil {
		t.Fatalf("no scenario %q among the exhaustive stage's", threeUpdates)
	}
	run := func(store bool, bound int, inCalls bool) (exhaustReport, bool) {
		found := false
		rep, err := exhaust(context.Background(), s, func(budget.Clock) budget.Budget { return newFallbackBucket(store) }, bound, 20_000, inCalls,
			func(h model.History, _ sched.Report) bool {
				found = Check(m, h, 0).Verdict == Violation
				return found
			})
		if err != nil {
			t.Fatal(err)
		}
		return rep, found
	}
	for _, tt := range []struct {
		store   bool
		bound   int
		inCalls bool
		want    bool
	}{
		{true, 2, false, false},
		{true, 2, true, false},
		{true, 3, true, true},
		{false, 3, true, false},
	} {
		rep, found := run(tt.store, tt.bound, tt.inCalls)
		t.Logf("store %v, bound %d, inside calls only %v: %d schedules, complete %v, violation %v", tt.store, tt.bound, tt.inCalls, rep.Schedules, rep.Complete, found)
		if found != tt.want {
			t.Errorf("store %v, bound %d, inside calls only %v: violation %v, want %v (%d schedules)", tt.store, tt.bound, tt.inCalls, found, tt.want, rep.Schedules)
		}
		if !tt.want && !rep.Complete {
			t.Errorf("store %v, bound %d: not complete after %d schedules", tt.store, tt.bound, rep.Schedules)
		}
	}
}

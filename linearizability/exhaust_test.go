package linearizability

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/sched"
	"github.com/retrybudget/retrybudget/model"
)

// The budgets below call the yield hooks by hand, as code rewritten by
// cmd/budgetcheck would: each is a bucket of whole tokens, one per retry,
// that never refills (model.Fixed-like: n retries, then none).

// casBucket takes a token with a compare-and-swap loop: correct.
type casBucket struct{ n atomic.Int64 }

func (b *casBucket) Request() {}
func (b *casBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	for {
		old := sched.P(&b.n).Load()
		if old <= 0 {
			return false
		}
		if sched.P(&b.n).CompareAndSwap(old, old-1) {
			return true
		}
	}
}
func (b *casBucket) Success(budget.Kind) {}

// loadThenStore loads, then stores: two retries at the last token can both
// be granted, when one is preempted between its load and its store.
type loadThenStore struct{ n atomic.Int64 }

func (b *loadThenStore) Request() {}
func (b *loadThenStore) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	old := sched.P(&b.n).Load()
	if old <= 0 {
		return false
	}
	sched.P(&b.n).Store(old - 1)
	return true
}
func (b *loadThenStore) Success(budget.Kind) {}

// mutexBucket takes a token under a mutex, reading its field several
// times: correct.
type mutexBucket struct {
	mu sync.Mutex
	n  int64
}

func (b *mutexBucket) Request() {}
func (b *mutexBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	sched.Hook.M(&b.mu).Lock()
	defer sched.Hook.M(&b.mu).Unlock()
	for range 8 {
		sched.P(b.n)
	}
	if b.n <= 0 {
		return false
	}
	b.n--
	return true
}
func (b *mutexBucket) Success(budget.Kind) {}

// halfLocked takes a transient retry's token under a mutex, and a
// throttled retry's with a plain load and store outside it: a data race.
// A throttled retry that runs between the locked read and the locked
// write loses its withdrawal, and a third retry of two tokens is granted.
type halfLocked struct {
	mu sync.Mutex
	n  int64
}

func (b *halfLocked) Request() {}
func (b *halfLocked) Retry(k budget.Kind) bool {
	switch k {
	case budget.Transient:
		sched.Hook.M(&b.mu).Lock()
		defer sched.Hook.M(&b.mu).Unlock()
		if sched.P(b.n) <= 0 {
			return false
		}
		sched.Hook.Point()
		b.n = sched.W(b.n - 1)
		return true
	case budget.Throttled:
		if sched.P(b.n) <= 0 { // BUG: no lock
			return false
		}
		sched.Hook.Point()
		b.n = sched.W(b.n - 1)
		return true
	}
	return false
}
func (b *halfLocked) Success(budget.Kind) {}

// poolBucket serves every retry in one of two worker goroutines it
// starts, on an unbuffered channel, and a worker takes a token with a load
// and then an Add: two workers that load the last token both take it.
// Each call is several channel operations, and the workers block and wake
// at each; the free switches there multiply the schedules.
type poolBucket struct {
	n    atomic.Int64
	req  chan chan bool
	stop chan struct{}
}

func newPoolBucket(n int64) *poolBucket {
	b := &poolBucket{req: make(chan chan bool), stop: make(chan struct{})}
	b.n.Store(n)
	for range 2 {
		sched.Hook.Go(b.serve)
	}
	return b
}

func (b *poolBucket) serve() {
	for {
		r := sched.R(b.req)
		if sched.Hook.Select(false, r, sched.R(b.stop)) != 0 {
			return
		}
		ok := false
		if sched.P(&b.n).Load() > 0 {
			sched.P(&b.n).Add(-1) // BUG: another worker may have taken it since the load
			ok = true
		}
		sched.Send(r.V, ok)
	}
}

func (b *poolBucket) Request() {}
func (b *poolBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	reply := make(chan bool)
	sched.Send(b.req, reply)
	return sched.Recv(reply)
}
func (b *poolBucket) Success(budget.Kind) {}
func (b *poolBucket) Close() error        { sched.Close(b.stop); return nil }

// tokens is the specification: n tokens, a retry takes one while any is
// left, nothing gives one back.
type tokens struct{ n int64 }

func (m tokens) Init() int64 { return m.n }
func (m tokens) Step(s int64, op model.Op) (int64, bool) {
	if op.Op == model.Retry && op.Kind.IsRetry() && s > 0 {
		return s - 1, true
	}
	return s, false
}
func (tokens) Equal(a, b int64) bool         { return a == b }
func (tokens) Hash(s int64) uint64           { return uint64(s) }
func (tokens) DescribeState(s int64) string  { return "tokens" }
func (tokens) DescribeOp(op model.Op) string { return op.String() }

func exhaustTokens(t *testing.T, newBudget func() budget.Budget, goroutines [][]model.Op, bound int) (exhaustReport, int) {
	t.Helper()
	violations := 0
	s := Scenario{Goroutines: goroutines}
	rep, err := exhaust(context.Background(), s, func(budget.Clock) budget.Budget { return newBudget() }, bound, 0, false,
		func(h model.History, r sched.Report) bool {
			res := Check[int64](tokens{1}, h, 0)
			if res.Verdict == Violation {
				violations++
				return true
			}
			return false
		})
	if err != nil {
		t.Fatal(err)
	}
	return rep, violations
}

var two = [][]model.Op{{model.OpRetry(model.Transient)}, {model.OpRetry(model.Transient)}}

func TestExhaustFindsCheckThenAct(t *testing.T) {
	rep, v := exhaustTokens(t, func() budget.Budget { b := &loadThenStore{}; b.n.Store(1); return b }, two, 1)
	if v != 1 {
		t.Fatalf("no violation in %d schedules with at most 1 preemption; the check-then-act needs one", rep.Schedules)
	}
	t.Logf("found after %d schedules", rep.Schedules)
}

func TestExhaustPassesCorrect(t *testing.T) {
	for _, tt := range []struct {
		name string
		new  func() budget.Budget
	}{
		{"CAS", func() budget.Budget { b := &casBucket{}; b.n.Store(1); return b }},
		{"Mutex", func() budget.Budget { return &mutexBucket{n: 1} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ops := [][]model.Op{
				{model.OpRetry(model.Transient), model.OpRetry(model.Transient)},
				{model.OpRetry(model.Throttled), model.OpRetry(model.Transient)},
			}
			rep, v := exhaustTokens(t, tt.new, ops, 2)
			if v != 0 {
				t.Fatalf("a violation on a correct budget after %d schedules", rep.Schedules)
			}
			if !rep.Complete || rep.Bound != 2 || rep.Schedules < 2 {
				t.Fatalf("report %+v; want every schedule within bound 2 run", rep)
			}
			t.Logf("%s: %d schedules, complete", tt.name, rep.Schedules)
		})
	}
}

// A store outside the lock races the steps inside a critical section:
// the search does not take a step under a lock to commute with a step
// whose object it does not know, though the goroutine that takes the
// latter begins with steps that commute (the stamps of its call).
func TestExhaustFindsARaceWithACriticalSection(t *testing.T) {
	s := Scenario{Goroutines: [][]model.Op{
		{model.OpRetry(model.Transient), model.OpRetry(model.Transient)},
		{model.OpRetry(model.Throttled)},
	}}
	rep, err := exhaust(context.Background(), s, func(budget.Clock) budget.Budget { return &halfLocked{n: 2} }, 1, 0, false,
		func(h model.History, r sched.Report) bool {
			return Check[int64](tokens{2}, h, 0).Verdict == Violation
		})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Complete {
		t.Fatalf("no violation in %d schedules with at most 1 preemption; the lost withdrawal needs one", rep.Schedules)
	}
	t.Logf("found after %d schedules", rep.Schedules)
}

// Where goroutines block and wake on channels at every call, the schedules
// within the bound are too many to run, and the search runs those closest
// to the serial order first: the worker pool's check-then-act, which needs
// one preemption, is found within a few hundred schedules; a search that
// ran every schedule of fewer preemptions first found none in 5,000.
func TestExhaustFindsAPoolsBugEarly(t *testing.T) {
	s := Scenario{Goroutines: [][]model.Op{
		{model.OpRetry(model.Transient)},
		{model.OpRetry(model.Transient), model.OpRetry(model.Transient)},
	}}
	rep, err := exhaust(context.Background(), s, func(budget.Clock) budget.Budget { return newPoolBucket(1) }, 2, 500, false,
		func(h model.History, r sched.Report) bool {
			return Check[int64](tokens{1}, h, 0).Verdict == Violation
		})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Schedules >= 500 {
		t.Fatalf("no violation in the first %d schedules", rep.Schedules)
	}
	t.Logf("found after %d schedules", rep.Schedules)
}

// A mutex's critical sections of 2 goroutines × 2 calls have 6 orders;
// the field reads inside them and the preemptions there, which only make
// the other goroutine wait, add no schedule.
func TestExhaustReducesCriticalSections(t *testing.T) {
	ops := [][]model.Op{
		{model.OpRetry(model.Transient), model.OpRetry(model.Transient)},
		{model.OpRetry(model.Transient), model.OpRetry(model.Transient)},
	}
	rep, _ := exhaustTokens(t, func() budget.Budget { return &mutexBucket{n: 1} }, ops, 2)
	if rep.Schedules > 80 {
		t.Errorf("%d schedules for two goroutines of two critical sections each; want few more than their 6 orders", rep.Schedules)
	}
	t.Logf("%d schedules", rep.Schedules)
}

// The story of a violation tells how the calls met, switch by switch, and
// marks the answer the model gives otherwise; a schedule that no longer
// violates the model has no story. (The budget's lines the story names are
// those of code outside this package, whose frames it leaves out: the
// budgets here are this package's, so internal/subjects/controltest checks those
// lines, through Search.)
func TestInterleavingTellsTheViolation(t *testing.T) {
	newBudget := func(budget.Clock) budget.Budget { b := &loadThenStore{}; b.n.Store(1); return b }
	s := Scenario{Goroutines: two}
	var failing *sched.Options
	if _, err := exhaust(context.Background(), s, newBudget, 1, 0, false, func(h model.History, r sched.Report) bool {
		if Check[int64](tokens{1}, h, 0).Verdict == Violation {
			failing = &r.Options
			return true
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	if failing == nil {
		t.Fatal("no violation to tell")
	}
	s.Control = failing
	story, err := interleaving[int64](context.Background(), tokens{1}, s, newBudget)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", story)
	for _, want := range []string{
		"how the calls met, switch by switch",
		"retry(transient)     starts, returns granted   <- the model answers denied",
	} {
		if !strings.Contains(story, want) {
			t.Errorf("the story lacks %q", want)
		}
	}
	// A schedule that no longer violates the model has no story.
	s.Control = &sched.Options{Strategy: sched.Serial()}
	if _, err := interleaving[int64](context.Background(), tokens{1}, s, newBudget); err == nil {
		t.Error("interleaving told the story of a linearizable run")
	}
}

// countingBucket is mutexBucket that counts requests under its mutex, and
// whose constructor stores into a field outside any lock, as most do.
type countingBucket struct {
	mutexBucket
	reqs int64
}

func newCountingBucket(n int64) *countingBucket {
	b := &countingBucket{}
	b.n = sched.W(n) // a step whose object is not known
	return b
}

func (b *countingBucket) Request() {
	sched.Hook.M(&b.mu).Lock()
	defer sched.Hook.M(&b.mu).Unlock()
	b.reqs++
}

// The operations before the goroutines run on the first goroutine while
// the others wait for the budget to be built; every unlock there wakes
// them, to find the budget still unbuilt. They are no choice there: the
// schedules do not grow with the operations before, even after a
// constructor's store, a step that may touch anything.
func TestExhaustDoesNotBranchBeforeTheGoroutines(t *testing.T) {
	schedules := func(before int) int {
		s := Scenario{Before: slices.Repeat([]model.Op{model.OpRequest}, before),
			Goroutines: [][]model.Op{{model.OpRetry(model.Transient)}, {model.OpRetry(model.Throttled), model.OpRequest}}}
		rep, err := exhaust(context.Background(), s, func(budget.Clock) budget.Budget { return newCountingBucket(1) }, 2, 2000, false,
			func(h model.History, r sched.Report) bool {
				if res := Check[int64](tokens{1}, h, 0); res.Verdict != Linearizable {
					t.Fatalf("a correct budget: %v", res.Explain())
				}
				return false
			})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Complete {
			t.Fatalf("%d operations before: %+v, want every schedule run", before, rep)
		}
		return rep.Schedules
	}
	few, many := schedules(1), schedules(20)
	if many != few {
		t.Errorf("%d schedules after 20 operations before the goroutines, %d after one: want as many", many, few)
	}
	t.Logf("%d schedules", few)
}

// nestedBucket takes a token under its mutex, and inside that critical
// section locks an inner mutex of its own inner times, as a budget built
// on a counter type with a lock of its own does.
type nestedBucket struct {
	mu    sync.Mutex
	inner sync.Mutex
	n     int64
	times int
}

func (b *nestedBucket) Request() {}
func (b *nestedBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	sched.Hook.M(&b.mu).Lock()
	defer sched.Hook.M(&b.mu).Unlock()
	for range b.times {
		sched.Hook.M(&b.inner).Lock()
		sched.P(b.n)
		sched.Hook.M(&b.inner).Unlock()
	}
	if b.n <= 0 {
		return false
	}
	b.n--
	return true
}
func (b *nestedBucket) Success(budget.Kind) {}

// A goroutine on its way to a critical section that another is inside
// would wait at its Lock: the steps of the other's critical section,
// inner locks included, need not be tried before and after its steps on
// the way, though its later steps, in the section, take the same inner
// lock. Critical sections of six inner locks give as many schedules as
// those of one.
func TestExhaustTakesInnerLocksToCommuteWithAWaitingGoroutine(t *testing.T) {
	ops := [][]model.Op{
		{model.OpRetry(model.Transient), model.OpRetry(model.Transient)},
		{model.OpRetry(model.Transient), model.OpRetry(model.Transient)},
	}
	schedules := func(times int) int {
		rep, v := exhaustTokens(t, func() budget.Budget { return &nestedBucket{n: 1, times: times} }, ops, 2)
		if v != 0 || !rep.Complete {
			t.Fatalf("%d inner locks: %+v, %d violations; want every schedule run, none violating", times, rep, v)
		}
		return rep.Schedules
	}
	one, six := schedules(1), schedules(6)
	if six > one {
		t.Errorf("%d schedules for critical sections of six inner locks, %d for those of one: want no more", six, one)
	}
	t.Logf("%d and %d schedules", one, six)
}

// The search gives the same schedules in every run of it: its filter of
// the objects a goroutine touches names them by their order in the run,
// not by the addresses they happened to be allocated at. (By address,
// two objects shared a bit now and then, and a search of nestedBucket
// took 58 schedules one time and 106 another.)
func TestExhaustIsTheSameEveryTime(t *testing.T) {
	ops := [][]model.Op{
		{model.OpRetry(model.Transient), model.OpRetry(model.Transient)},
		{model.OpRetry(model.Transient), model.OpRetry(model.Transient)},
	}
	counts := map[int]int{}
	for range 20 {
		rep, _ := exhaustTokens(t, func() budget.Budget { return &nestedBucket{n: 1, times: 6} }, ops, 2)
		counts[rep.Schedules]++
		_ = make([]byte, 1+len(counts)*24) // moves the next run's allocations
	}
	if len(counts) != 1 {
		t.Errorf("schedules in 20 searches of one scenario (count: searches): %v; want one count", counts)
	}
}

// actorBucket keeps its tokens in a goroutine of its own, which serves
// every call on an unbuffered channel: correct.
type actorBucket struct {
	req  chan chan bool // nil: a Request
	stop chan struct{}
}

func newActorBucket(n int64) *actorBucket {
	b := &actorBucket{req: make(chan chan bool), stop: make(chan struct{})}
	sched.Hook.Go(func() {
		for {
			r := sched.R(b.req)
			if sched.Hook.Select(false, r, sched.R(b.stop)) != 0 {
				return
			}
			if r.V == nil {
				continue // a request: counted nowhere
			}
			ok := n > 0
			if ok {
				n--
			}
			sched.Send(r.V, ok)
		}
	})
	return b
}

func (b *actorBucket) Request() { sched.Send(b.req, nil) }
func (b *actorBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	reply := make(chan bool)
	sched.Send(b.req, reply)
	return sched.Recv(reply)
}
func (b *actorBucket) Success(budget.Kind) {}
func (b *actorBucket) Close() error        { sched.Close(b.stop); return nil }

// The budget's own goroutine runs with the first one while it makes the
// operations before the goroutines, and the search does not branch there:
// those operations only bring the budget to the edge the scenario
// explores. Every schedule begins as the first does, up to the step at
// which the others may go.
func TestExhaustDoesNotBranchAmongTheOperationsBefore(t *testing.T) {
	s := Scenario{Before: slices.Repeat([]model.Op{model.OpRequest}, 6),
		Goroutines: [][]model.Op{{model.OpRetry(model.Transient)}, {model.OpRetry(model.Throttled)}}}
	var first []int
	opened, differ := 0, 0
	rep, err := exhaust(context.Background(), s, func(budget.Clock) budget.Budget { return newActorBucket(1) }, 2, 5000, false,
		func(h model.History, r sched.Report) bool {
			if res := Check[int64](tokens{1}, h, 0); res.Verdict != Linearizable {
				t.Fatalf("a correct budget: %v", res.Explain())
			}
			if first == nil {
				first, opened = r.Options.Schedule, r.Opened
			} else if !slices.Equal(r.Options.Schedule[:opened], first[:opened]) {
				differ++
			}
			return false
		})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete || opened < 20 {
		t.Fatalf("%+v, the others free from step %d: want every schedule run, after many steps of the six operations before", rep, opened)
	}
	if differ > 0 {
		t.Errorf("%d of %d schedules differ from the first before step %d, where the others may go", differ, rep.Schedules, opened)
	}
	t.Logf("%d schedules, the others free from step %d", rep.Schedules, opened)
}

// watchedBucket is mutexBucket with a goroutine of its own that waits in a
// select of two channels nothing sends on until Close, as a budget's
// janitor or refill loop waits for its tick or its stop.
type watchedBucket struct {
	mutexBucket
	tick, stop chan struct{}
}

func newWatchedBucket(n int64) *watchedBucket {
	b := &watchedBucket{mutexBucket: mutexBucket{n: n}, tick: make(chan struct{}), stop: make(chan struct{})}
	sched.Hook.Go(func() {
		for sched.Hook.Select(false, sched.R(b.tick), sched.R(b.stop)) == 0 {
		}
	})
	return b
}

func (b *watchedBucket) Close() error { sched.Close(b.stop); return nil }

// A goroutine blocked in a select is no choice until a step releases one
// of its channels: woken by every unlock of the others, it would only
// block again. The idle goroutine adds no schedule.
func TestExhaustLeavesAnIdleSelectAlone(t *testing.T) {
	ops := [][]model.Op{
		{model.OpRetry(model.Transient), model.OpRetry(model.Transient)},
		{model.OpRetry(model.Transient), model.OpRetry(model.Transient)},
	}
	plain, _ := exhaustTokens(t, func() budget.Budget { return &mutexBucket{n: 1} }, ops, 2)
	watched, v := exhaustTokens(t, func() budget.Budget { return newWatchedBucket(1) }, ops, 2)
	if v != 0 || !watched.Complete {
		t.Fatalf("%+v, %d violations: want every schedule run, none violating", watched, v)
	}
	if watched.Schedules != plain.Schedules {
		t.Errorf("%d schedules with an idle goroutine in a select, %d without: want as many", watched.Schedules, plain.Schedules)
	}
}

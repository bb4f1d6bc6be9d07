package escapes

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// ---------------------------------------------------------------------------
// Class 7: bugs that need one call preempted three times (deep.go).
//
// No public hook can hold a call between two of its steps, so playDeep
// plays one call by hand, with the very steps fallbackUpdate is made of,
// and runs the other goroutine's whole calls in its three windows: after
// the read of each fast attempt, and after the slow path's first read.

type deepSteps interface {
	budget.Budget
	fallbackSteps
}

type deepSubject struct {
	name   string
	model  model.TokenBucket
	newB   func() deepSteps
	mutant bool
	// window holds G's calls in the three windows of the class's
	// schedule (deep.go's doc comments); V's call is Retry(transient).
	window [3]model.Op
}

var (
	spinWindows = [3]model.Op{model.OpRetry(budget.Transient), model.OpSuccess(budget.Transient), model.OpRetry(budget.Transient)}
	seqWindows  = [3]model.Op{model.OpRetry(budget.Throttled), model.OpRetry(budget.Transient), model.OpSuccess(budget.Transient)}
)

var deepSubjects = []deepSubject{
	{"SpinThenStore", SpinThenStoreModel, func() deepSteps { return NewSpinThenStore(SpinThenStoreModel) }, true, spinWindows},
	{"SpinThenCAS", SpinThenCASModel, func() deepSteps { return NewSpinThenCAS(SpinThenCASModel) }, false, spinWindows},
	{"SplitSeqlock", SplitSeqlockModel, func() deepSteps { return NewSplitSeqlock(SplitSeqlockModel) }, true, seqWindows},
	{"PackedSeqlock", PackedSeqlockModel, func() deepSteps { return NewPackedSeqlock(PackedSeqlockModel) }, false, seqWindows},
}

func deepSubjectNamed(name string) deepSubject {
	for _, c := range deepSubjects {
		if c.name == name {
			return c
		}
	}
	panic(name)
}

// playDeep plays V's call of op on b step by step, as fallbackUpdate makes
// it, running windows[i] at its i-th preemption. It returns V's answer and
// whether V took the slow path.
func playDeep(b deepSteps, r deepRule, op deepOp, windows [3]func()) (granted, slow bool) {
	for try := range fastTries {
		v, ok := b.fastRead()
		windows[try]() // preempted between the read and the swap
		if !ok {
			continue
		}
		n, write, g := r.next(op, v.bal)
		if !write {
			return g, false
		}
		if b.fastPublish(v, n) {
			return g, false
		}
	}
	b.lock()
	defer b.unlock()
	for first := true; ; first = false {
		v := b.slowRead()
		if first {
			windows[2]() // preempted between the read and the write
		}
		n, write, g := r.next(op, v.bal)
		if !write {
			return g, true
		}
		if b.slowPublish(v, n) {
			return g, true
		}
	}
}

// A deepCall is one call of a history and what it answered.
type deepCall struct {
	op      model.Op
	granted bool
}

func (c deepCall) run(b budget.Budget) deepCall {
	switch c.op.Op {
	case model.Request:
		b.Request()
	case model.Retry:
		c.granted = b.Retry(c.op.Kind)
	case model.Success:
		b.Success(c.op.Kind)
	}
	return c
}

// deepFinals returns the model's balance after every order of G's calls
// (in their order) and V's one call, placed after G's first lo calls and
// before its calls from hi on, in which every call answers as it did. An
// empty result means that no order explains the answers.
func deepFinals(m model.TokenBucket, g []deepCall, v deepCall, lo, hi int) []int64 {
	var finals []int64
	for pos := lo; pos <= hi; pos++ {
		order := slices.Concat(g[:pos], []deepCall{v}, g[pos:])
		s, ok := m.Init(), true
		for _, c := range order {
			var granted bool
			s, granted = m.Step(s, c.op)
			ok = ok && granted == c.granted
		}
		if ok && !slices.Contains(finals, s.Tokens) {
			finals = append(finals, s.Tokens)
		}
	}
	return finals
}

// deepSchedule plays the class's three-preemption schedule on a new
// budget: V's Retry(transient) with G's calls in its three windows. It
// returns the budget, V's call, G's calls, whether V took the slow path,
// and the model's balance after them in every order that explains them.
func deepSchedule(c deepSubject) (b deepSteps, v deepCall, g []deepCall, slow bool, finals []int64) {
	b = c.newB()
	r := newDeepRule(c.model)
	var windows [3]func()
	for i, op := range c.window {
		windows[i] = func() { g = append(g, deepCall{op: op}.run(b)) }
	}
	granted, slow := playDeep(b, r, r.retryOp(budget.Transient), windows)
	v = deepCall{model.OpRetry(budget.Transient), granted}
	return b, v, g, slow, deepFinals(c.model, g, v, 0, len(g))
}

// deepGrants asks Retry(kind) until the model, from balance from, would
// deny it, and returns how many the budget granted and how many the model.
func deepGrants(b budget.Budget, m model.TokenBucket, from int64, kind budget.Kind) (got, want int) {
	s := model.TokenBucketState{Tokens: from}
	for range 100 {
		var ok bool
		s, ok = m.Step(s, model.OpRetry(kind))
		if b.Retry(kind) {
			got++
		}
		if !ok {
			return got, want
		}
		want++
	}
	return got, want
}

// TestDeepSpinThenStore plays SpinThenStore's schedule: V's
// Retry(transient) preempted after the read of each fast attempt and after
// the slow path's read, with G's Retry(transient), Success(transient),
// Retry(transient) in those windows. Then V asks Retry(transient) until
// the model denies.
func TestDeepSpinThenStore(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"SpinThenCAS", "SpinThenStore"} {
		c := deepSubjectNamed(name)
		b, v, g, slow, finals := deepSchedule(c)
		if !slow || !v.granted || !g[0].granted || !g[2].granted {
			t.Fatalf("%s: the schedule did not run as planned: V %+v (slow path %v), G %+v", name, v, slow, g)
		}
		if !slices.Equal(finals, []int64{2_000}) {
			t.Fatalf("the model after the schedule: %v, want [2000] in every order", finals)
		}
		bal := b.balance()
		got, want := deepGrants(b, c.model, finals[0], budget.Transient)
		t.Logf("%s after the three-preemption schedule: balance %d (model %d); V's next %d retries: %d granted, the model grants %d",
			name, bal, finals[0], want+1, got, want)
		if !c.mutant {
			if bal != finals[0] || got != want {
				t.Errorf("SpinThenCAS: balance %d, then %d retries granted; the model: %d, then %d", bal, got, finals[0], want)
			}
			continue
		}
		// G's charge in window 3 was lost: one token too many, and V's
		// third retry granted where the model denies it.
		if bal != 3_000 || got != want+1 {
			t.Errorf("SpinThenStore: balance %d, then %d retries granted; want 3000 and %d (the model: %d, then %d)", bal, got, want+1, finals[0], want)
		}
	}
}

// TestDeepSeqlock plays SplitSeqlock's schedule: V's Retry(transient)
// preempted after the reads of each fast attempt and after the writer's
// read, with G's Retry(throttled), Retry(transient), Success(transient) in
// those windows. Then G's fourth call is Retry(transient).
func TestDeepSeqlock(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"PackedSeqlock", "SplitSeqlock"} {
		c := deepSubjectNamed(name)
		b, v, g, slow, finals := deepSchedule(c)
		if !slow || !v.granted || !g[0].granted || !g[1].granted {
			t.Fatalf("%s: the schedule did not run as planned: V %+v (slow path %v), G %+v", name, v, slow, g)
		}
		if !slices.Equal(finals, []int64{2_000}) {
			t.Fatalf("the model after the schedule: %v, want [2000] in every order", finals)
		}
		bal := b.balance()
		_, want := c.model.Step(model.TokenBucketState{Tokens: finals[0]}, model.OpRetry(budget.Transient))
		got := b.Retry(budget.Transient)
		t.Logf("%s after the three-preemption schedule: balance %d (model %d); G's Retry(transient) granted %v, the model %v",
			name, bal, finals[0], got, want)
		if !want {
			t.Fatal("the model denies G's fourth call; the schedule is not the one documented")
		}
		if !c.mutant {
			if bal != finals[0] || !got {
				t.Errorf("PackedSeqlock: balance %d, then G's retry granted %v; the model: %d, granted", bal, got, finals[0])
			}
			continue
		}
		// The refund of window 3 was overwritten by V's Store.
		if bal != 0 || got {
			t.Errorf("SplitSeqlock: balance %d, then G's retry granted %v; want 0 and denied (the model: %d, granted)", bal, got, finals[0])
		}
	}
}

// TestDeepTwoWindows plays each schedule with one of V's three
// preemptions left out: G makes its next call at each of the other two
// (and, in a second round, one call before V starts), and its calls left
// over after V returns. Each mutant then follows its model, as its twin
// does. That no schedule at all of two preemptions shows the bugs is
// proved in deep.go's comments; this checks the hand schedules' part.
func TestDeepTwoWindows(t *testing.T) {
	t.Parallel()
	for _, c := range deepSubjects {
		r := newDeepRule(c.model)
		for _, early := range []bool{false, true} {
			for skip := range 3 {
				b := c.newB()
				var g []deepCall
				next := func() {
					if len(g) < len(c.window) {
						g = append(g, deepCall{op: c.window[len(g)]}.run(b))
					}
				}
				lo := 0
				if early {
					next()
					lo = 1
				}
				var windows [3]func()
				for i := range windows {
					windows[i] = func() {
						if i != skip {
							next()
						}
					}
				}
				granted, _ := playDeep(b, r, r.retryOp(budget.Transient), windows)
				v := deepCall{model.OpRetry(budget.Transient), granted}
				hi := len(g)
				for len(g) < len(c.window) {
					next()
				}
				finals := deepFinals(c.model, g, v, lo, hi)
				if bal := b.balance(); !slices.Contains(finals, bal) {
					t.Errorf("%s, early %v, window %d left out: balance %d; the model allows %v (V %+v, G %+v)", c.name, early, skip+1, bal, finals, v, g)
				}
			}
		}
	}
}

// TestDeepSequential checks every mutant and twin against its model on
// random sequential histories: the answer of every call and the balance
// after it.
func TestDeepSequential(t *testing.T) {
	t.Parallel()
	ops := []model.Op{
		model.OpRequest,
		model.OpRetry(budget.Transient), model.OpRetry(budget.Throttled),
		model.OpSuccess(budget.FirstAttempt), model.OpSuccess(budget.Transient), model.OpSuccess(budget.Throttled),
		model.OpRetry(budget.FirstAttempt), model.OpSuccess(budget.Kind(7)),
	}
	for _, c := range deepSubjects {
		for seed := range uint64(5) {
			r := rand.New(rand.NewPCG(seed, 77))
			b := c.newB()
			s := c.model.Init()
			for i := range 2_000 {
				op := ops[r.IntN(len(ops))]
				if r.IntN(10) < 4 { // retries more often, so the bucket drains
					op = ops[1+r.IntN(2)]
				}
				var got bool
				switch op.Op {
				case model.Request:
					b.Request()
				case model.Retry:
					got = b.Retry(op.Kind)
				case model.Success:
					b.Success(op.Kind)
				}
				var want bool
				s, want = c.model.Step(s, op)
				if got != want {
					t.Fatalf("%s seed %d op %d %v: budget %v, model %v (model after: %s)", c.name, seed, i, op, got, want, c.model.DescribeState(s))
				}
				if bal := b.balance(); bal != s.Tokens {
					t.Fatalf("%s seed %d op %d %v: balance %d, model %d", c.name, seed, i, op, bal, s.Tokens)
				}
			}
		}
	}
}

// yieldSteps runs a budget's steps with a runtime.Gosched before each, so
// that calls on few processors interleave between their steps and many of
// them lose their fast attempts; it counts the slow paths taken.
type yieldSteps struct {
	deepSteps
	slow *atomic.Int64
}

func (y yieldSteps) fastRead() (deepView, bool) { runtime.Gosched(); return y.deepSteps.fastRead() }
func (y yieldSteps) fastPublish(v deepView, n int64) bool {
	runtime.Gosched()
	return y.deepSteps.fastPublish(v, n)
}
func (y yieldSteps) lock()              { y.slow.Add(1); y.deepSteps.lock() }
func (y yieldSteps) slowRead() deepView { runtime.Gosched(); return y.deepSteps.slowRead() }
func (y yieldSteps) slowPublish(v deepView, n int64) bool {
	runtime.Gosched()
	return y.deepSteps.slowPublish(v, n)
}

// TestDeepConcurrent runs each twin under free concurrency: 8 goroutines
// × 5,000 calls, once through its methods and once through its steps with
// a yield before each (so that slow paths are taken often). Every granted
// retry is counted out until its goroutine refunds it; the retries out
// never cost more than the capacity plus every bonus credited so far (the
// bucket loses only what it grants, and gets back at most what it is
// credited). At the end, with every retry refunded, the bucket is full.
func TestDeepConcurrent(t *testing.T) {
	t.Parallel()
	for _, c := range deepSubjects {
		if c.mutant {
			continue
		}
		for _, yield := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/yield=%v", c.name, yield), func(t *testing.T) {
				m := c.model
				rule := newDeepRule(m)
				b := c.newB()
				var slow atomic.Int64
				retry, success := b.Retry, b.Success
				if yield {
					y := yieldSteps{b, &slow}
					retry = func(k budget.Kind) bool { return fallbackUpdate(y, rule, rule.retryOp(k)) }
					success = func(k budget.Kind) {
						if op := rule.successOp(k); op.amount > 0 {
							fallbackUpdate(y, rule, op)
						}
					}
				}
				var out, bonus atomic.Int64 // milli-tokens
				var wg sync.WaitGroup
				for g := range 8 {
					wg.Go(func() {
						r := rand.New(rand.NewPCG(uint64(g), 5))
						var held []budget.Kind
						for range 5_000 {
							switch x := r.IntN(10); {
							case x < 4 && len(held) > 0:
								k := held[len(held)-1]
								held = held[:len(held)-1]
								out.Add(-rule.cost(k)) // before the refund, so a grant never counts it twice
								success(k)
							case x < 8:
								k := budget.Transient
								if r.IntN(2) == 0 {
									k = budget.Throttled
								}
								if retry(k) {
									held = append(held, k)
									if n := out.Add(rule.cost(k)); n > m.Capacity+bonus.Load() {
										t.Errorf("%d milli-tokens of retries out, more than the capacity %d and the bonuses %d", n, m.Capacity, bonus.Load())
									}
								}
							case x < 9:
								bonus.Add(m.SuccessBonus) // before the credit: an upper bound
								success(budget.FirstAttempt)
							default:
								b.Request()
							}
						}
						for i := len(held) - 1; i >= 0; i-- {
							out.Add(-rule.cost(held[i]))
							success(held[i])
						}
					})
				}
				wg.Wait()
				if yield {
					t.Logf("%d slow paths taken", slow.Load())
					if slow.Load() == 0 {
						t.Error("no call took the slow path")
					}
				}
				if got := b.balance(); got != m.Capacity {
					t.Errorf("balance %d after every retry was refunded, want the capacity %d", got, m.Capacity)
				}
				if got, want := grants(b, budget.Transient, 100), int(m.Capacity/m.TransientCost); got != want {
					t.Errorf("after the run, %d transient retries granted, want %d", got, want)
				}
			})
		}
	}
}

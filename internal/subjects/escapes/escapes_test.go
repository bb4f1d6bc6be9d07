package escapes

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// ---------------------------------------------------------------------------
// Helpers: run a budget and its model in lockstep on a ManualClock.

type closer interface{ Close() error }

// lockstep applies ops to a budget built on a ManualClock reading start and
// to its model, and describes the first answer that differs ("" if none).
func lockstep[S any](m model.Model[S], start time.Duration, newB func(budget.Clock) budget.Budget, ops []model.Op) string {
	clk := new(budget.ManualClock)
	clk.Set(start)
	b := newB(clk)
	if c, ok := b.(closer); ok {
		defer c.Close()
	}
	s := m.Init()
	if st, ok := any(m).(model.Starter[S]); ok {
		s = st.InitAt(start)
	}
	for i, op := range ops {
		var got bool
		switch op.Op {
		case model.Advance:
			clk.Advance(op.D)
		case model.Request:
			b.Request()
		case model.Retry:
			got = b.Retry(op.Kind)
		case model.Success:
			b.Success(op.Kind)
		case model.AttemptEnd:
			b.(budget.InFlightBudget).AttemptEnd(op.Kind)
		case model.CallEnd:
			b.(budget.InFlightBudget).CallEnd()
		}
		var want bool
		s, want = m.Step(s, op)
		if got != want {
			return fmt.Sprintf("op %d %v at clock %v: budget says %v, model %v (model after: %s)", i, op, clk.Now(), got, want, m.DescribeState(s))
		}
	}
	return ""
}

var kinds = []budget.Kind{budget.FirstAttempt, budget.Transient, budget.Throttled, budget.Kind(7)}

// randomOps draws n operations; an Advance is a step in [-step/2, step], or
// one of jumps one time in five when jumps are given.
func randomOps(r *rand.Rand, n int, structured bool, step time.Duration, jumps []time.Duration) []model.Op {
	ops := make([]model.Op, 0, n)
	for range n {
		k := kinds[r.IntN(len(kinds))]
		if r.IntN(8) == 0 { // mostly retry kinds
			k = budget.Transient
		}
		x := r.IntN(100)
		switch {
		case x < 25:
			ops = append(ops, model.OpRequest)
		case x < 60:
			ops = append(ops, model.OpRetry(k))
		case x < 72:
			ops = append(ops, model.OpSuccess(k))
		case x < 82 && structured:
			ops = append(ops, model.OpAttemptEnd(k))
		case x < 88 && structured:
			ops = append(ops, model.OpCallEnd)
		default:
			d := time.Duration(r.Int64N(int64(step)*3/2+1)) - step/2
			if len(jumps) > 0 && r.IntN(5) == 0 {
				d = jumps[r.IntN(len(jumps))]
			}
			ops = append(ops, model.OpAdvance(d))
		}
	}
	return ops
}

// wildJumps are clock steps at every edge the twins must get right.
var wildJumps = []time.Duration{
	65536 * time.Second, 2 * 65536 * time.Second, 65536*time.Second + 3*time.Second, 65536*time.Second - time.Nanosecond,
	(1 << 32) * time.Millisecond, (1<<32)*time.Millisecond + 500*time.Millisecond, (1 << 31) * time.Millisecond,
	math.MaxInt64, math.MinInt64, math.MaxInt64 / 2, -time.Hour, -1, 1, time.Minute, 61 * time.Second,
	time.Duration(0x7fff_ffff_0000_0000), -(1 << 32) * time.Millisecond,
}

var wildStarts = []time.Duration{0, -7500 * time.Millisecond, math.MaxInt64 - 3*time.Second, math.MinInt64 + 3*time.Second, 1 << 62, -(1 << 62)}

// twinFollows checks a twin against its model on random histories with
// wild clock steps, from wild starting instants.
func twinFollows[S any](t *testing.T, m model.Model[S], structured bool, newB func(budget.Clock) budget.Budget) {
	t.Helper()
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		start := wildStarts[int(seed)%len(wildStarts)]
		ops := randomOps(r, 300, structured, 3*time.Second, wildJumps)
		if msg := lockstep(m, start, newB, ops); msg != "" {
			t.Fatalf("seed %d, start %d: %s", seed, start, msg)
		}
	}
}

// ordinaryFollows checks a budget against its model on random histories of
// ordinary use: small clock steps, both ways, from ordinary instants.
func ordinaryFollows[S any](t *testing.T, m model.Model[S], structured bool, step time.Duration, newB func(budget.Clock) budget.Budget) {
	t.Helper()
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 11))
		start := []time.Duration{0, -7500 * time.Millisecond, 123456789}[seed%3]
		ops := randomOps(r, 300, structured, step, nil)
		if msg := lockstep(m, start, newB, ops); msg != "" {
			t.Fatalf("seed %d, start %d: %s", seed, start, msg)
		}
	}
}

func repeat(n int, op model.Op) []model.Op {
	ops := make([]model.Op, n)
	for i := range ops {
		ops[i] = op
	}
	return ops
}

func concat(parts ...[]model.Op) []model.Op {
	var ops []model.Op
	for _, p := range parts {
		ops = append(ops, p...)
	}
	return ops
}

var transient = model.OpRetry(budget.Transient)

// grants counts the retries granted before the first denial (at most max).
func grants(b budget.Budget, kind budget.Kind, max int) int {
	for n := range max {
		if !b.Retry(kind) {
			return n
		}
	}
	return max
}

// ---------------------------------------------------------------------------
// Class 1: 16-bit slot tags.

func newNarrow(c budget.Clock) budget.Budget { return NewNarrowSlotTag(NarrowSlotTagModel, c) }
func newWide(c budget.Clock) budget.Budget   { return NewWideSlotTag(WideSlotTagModel, c) }

func TestSlotTag(t *testing.T) {
	t.Parallel()
	t.Run("ordinary", func(t *testing.T) {
		ordinaryFollows(t, NarrowSlotTagModel, false, 3*time.Second, newNarrow)
		ordinaryFollows(t, WideSlotTagModel, false, 3*time.Second, newWide)
	})
	t.Run("twin wild", func(t *testing.T) { twinFollows(t, WideSlotTagModel, false, newWide) })

	// 30 requests and 3 retries at 0 s (the floor, and the ratio's 3), then
	// an idle gap of exactly 65,536 one-second slots: the window is empty,
	// and the floor grants a retry.
	ops := concat(repeat(30, model.OpRequest), repeat(3, transient), []model.Op{model.OpAdvance(65536 * time.Second), transient})
	if msg := lockstep(WideSlotTagModel, 0, newWide, ops); msg != "" {
		t.Errorf("WideSlotTag: %s", msg)
	}
	msg := lockstep(NarrowSlotTagModel, 0, newNarrow, ops)
	if !strings.Contains(msg, "op 34 ") || !strings.Contains(msg, "budget says false, model true") {
		t.Errorf("NarrowSlotTag after 65536 idle slots: want the retry denied where the model grants it, got %q", msg)
	}
	t.Log("NarrowSlotTag:", msg)

	// 200 requests at 0 s, then the gap: the model allows the floor's 3
	// retries; the stale slot's requests come back and allow 20.
	for _, c := range []struct {
		name string
		newB func(budget.Clock) budget.Budget
		want int
	}{{"WideSlotTag", newWide, 3}, {"NarrowSlotTag", newNarrow, 20}} {
		clk := new(budget.ManualClock)
		b := c.newB(clk)
		for range 200 {
			b.Request()
		}
		clk.Advance(2 * 65536 * time.Second) // a multiple works too
		if got := grants(b, budget.Transient, 100); got != c.want {
			t.Errorf("%s: %d retries granted after the gap, want %d", c.name, got, c.want)
		}
	}
}

// ---------------------------------------------------------------------------
// Class 2: a 32-bit millisecond tick.

func newTick32(c budget.Clock) budget.Budget { return NewTick32Bucket(Tick32BucketModel, c) }
func newTick64(c budget.Clock) budget.Budget { return NewTick64Bucket(Tick64BucketModel, c) }

func TestTickBucket(t *testing.T) {
	t.Parallel()
	t.Run("ordinary", func(t *testing.T) {
		ordinaryFollows(t, Tick32BucketModel, false, 3*time.Second, newTick32)
		ordinaryFollows(t, Tick64BucketModel, false, 3*time.Second, newTick64)
	})
	t.Run("twin wild", func(t *testing.T) { twinFollows(t, Tick64BucketModel, false, newTick64) })

	for _, gap := range []time.Duration{(1 << 32) * time.Millisecond, (1<<32)*time.Millisecond + 500*time.Millisecond, 30 * 24 * time.Hour} {
		// Drain the 40 tokens, wait out the gap: the model is full again.
		ops := concat(repeat(41, transient), []model.Op{model.OpAdvance(gap), transient})
		if msg := lockstep(Tick64BucketModel, 0, newTick64, ops); msg != "" {
			t.Errorf("Tick64Bucket, gap %v: %s", gap, msg)
		}
		msg := lockstep(Tick32BucketModel, 0, newTick32, ops)
		if !strings.Contains(msg, "op 42 ") || !strings.Contains(msg, "budget says false, model true") {
			t.Errorf("Tick32Bucket, gap %v: want the retry denied where the model grants it, got %q", gap, msg)
		}
		t.Logf("Tick32Bucket, gap %v: %s", gap, msg)
	}
}

// ---------------------------------------------------------------------------
// Class 3: an actor's Close.

func newActorRace(c budget.Clock) budget.Budget { return NewActorCloseRace(ActorCloseRaceModel, c) }
func newActorSafe(c budget.Clock) budget.Budget { return NewActorSafeClose(ActorSafeCloseModel, c) }

// gateClock reads 0; once armed, its next reading waits for gate to close.
type gateClock struct {
	armed atomic.Bool
	gate  chan struct{}
}

func (c *gateClock) Now() time.Duration {
	if c.armed.CompareAndSwap(true, false) {
		<-c.gate
	}
	return 0
}

// closeRace makes a call race Close: the actor is held inside a first call
// (its clock reading waits on a gate), a second call waits to hand the actor
// its message, and Close runs then. It returns the second call's answer and
// what it panicked with.
func closeRace(t *testing.T, newB func(budget.Clock) budget.Budget) (granted bool, panicked any) {
	synctest.Test(t, func(t *testing.T) {
		clk := &gateClock{gate: make(chan struct{})}
		b := newB(clk)
		clk.armed.Store(true)
		first, second, closed := make(chan struct{}), make(chan struct{}), make(chan struct{})
		go func() { defer close(first); b.Success(budget.FirstAttempt) }() // the actor waits in the clock
		synctest.Wait()
		go func() {
			defer close(second)
			defer func() { panicked = recover() }()
			granted = b.Retry(budget.Transient) // waits to send: the actor is busy
		}()
		synctest.Wait()
		go func() { defer close(closed); b.(closer).Close() }()
		synctest.Wait()
		close(clk.gate)
		<-first
		<-second
		<-closed
		// After Close, a call returns at once.
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("a call after Close panicked: %v", p)
				}
			}()
			if b.Retry(budget.Transient) {
				t.Error("a retry after Close was granted")
			}
		}()
	})
	return granted, panicked
}

func TestActorClose(t *testing.T) {
	t.Parallel()
	t.Run("ordinary", func(t *testing.T) {
		ordinaryFollows(t, ActorCloseRaceModel, false, 3*time.Second, newActorRace)
		ordinaryFollows(t, ActorSafeCloseModel, false, 3*time.Second, newActorSafe)
	})
	t.Run("twin wild", func(t *testing.T) { twinFollows(t, ActorSafeCloseModel, false, newActorSafe) })

	if granted, p := closeRace(t, newActorSafe); p != nil || granted {
		t.Errorf("ActorSafeClose: a call racing Close returned %v, panicked %v; want denied, no panic", granted, p)
	}
	_, p := closeRace(t, newActorRace)
	if p == nil || !strings.Contains(fmt.Sprint(p), "send on closed channel") {
		t.Errorf("ActorCloseRace: want a call racing Close to panic with send on closed channel, got %v", p)
	}
	t.Logf("ActorCloseRace: a call racing Close panicked: %v", p)

	// The twin under free concurrency with Close: no panic, no hang, and
	// no goroutine left (synctest fails a bubble that leaves one blocked).
	synctest.Test(t, func(t *testing.T) {
		b := NewActorSafeClose(ActorSafeCloseModel, budget.NewMonotonicClock())
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				for j := range 200 {
					b.Request()
					if b.Retry(budget.Transient) && j%2 == 0 {
						b.Success(budget.Transient)
					}
					if i == 3 && j == 50 {
						b.Close()
					}
				}
			})
		}
		wg.Wait()
		b.Close()
	})
}

// ---------------------------------------------------------------------------
// Class 4: ABA on a Treiber stack.
//
// The ABA needs a pop preempted between reading the head and its
// compare-and-swap while other calls pop, recycle and push the same node
// back with the same count (ABAStack's doc comment: four goroutines, five
// preemptions). No public hook can hold a call there, so abaSchedule plays
// that schedule by hand, one goroutine's step at a time, with the very
// steps Retry and Success are made of (readTop, casPop, pushFree, spare,
// pushToken). Then the twin is checked under real concurrency.

type stackSteps interface {
	budget.Budget
	readTop() (h uint64, top, next uint32)
	casPop(h uint64, next uint32) bool
	pushFree(node uint32)
	spare() uint32
	pushToken(node uint32)
}

// abaSchedule returns G1's answer and how many retries the pool grants
// afterwards, in the last of three rounds of "grant until denied, then give
// every one back". The model: G1, G2, G3 each get a token, G4's and G3's
// three successes give them back, so the pool is full, and every round
// grants 4.
func abaSchedule(t *testing.T, b stackSteps) (g1 bool, after int) {
	h1, _, next1 := b.readTop() // G1 Retry: reads (A, 4) and A.next = B; preempted
	h2, a, next2 := b.readTop() // G2 Retry: pops A; preempted before freeing it
	if !b.casPop(h2, next2) {
		t.Fatal("G2's pop failed")
	}
	if !b.Retry(budget.Transient) { // G3 Retry: pops B, frees it
		t.Fatal("G3's retry denied")
	}
	node := b.spare()                  // G4 Success: takes B from the free list; preempted
	b.Success(budget.Transient)        // G3 Success: a new node X: X→C→D (3)
	b.pushFree(a)                      // G2 frees A; its Retry returns true
	b.Success(budget.Transient)        // G3 Success: takes A: A→X→C→D (4)
	if g1 = b.casPop(h1, next1); !g1 { // G1 resumes
		g1 = b.Retry(budget.Transient) // its Retry's loop reads again
	}
	b.pushToken(node) // G4 resumes: pushes B
	after = grants(b, budget.Transient, 100)
	t.Logf("%T: %d granted after the schedule", b, after)
	for round := range 3 { // give back what was granted, and ask again
		for range after {
			b.Success(budget.Transient)
		}
		after = grants(b, budget.Transient, 100)
		t.Logf("%T: round %d: %d granted", b, round, after)
	}
	return g1, after
}

func newABA(budget.Clock) budget.Budget    { return NewABAStack(ABAStackModel) }
func newTagged(budget.Clock) budget.Budget { return NewTaggedStack(TaggedStackModel) }

func TestStack(t *testing.T) {
	t.Parallel()
	t.Run("ordinary", func(t *testing.T) {
		ordinaryFollows(t, ABAStackModel, false, time.Second, newABA)
		ordinaryFollows(t, TaggedStackModel, false, time.Second, newTagged)
	})
	t.Run("twin wild", func(t *testing.T) { twinFollows(t, TaggedStackModel, false, newTagged) })

	g1, after := abaSchedule(t, NewTaggedStack(TaggedStackModel))
	if !g1 || after != 4 {
		t.Errorf("TaggedStack under the ABA schedule: G1 %v, then %d granted; want true, then 4", g1, after)
	}
	g1, after = abaSchedule(t, NewABAStack(ABAStackModel))
	if !g1 || after != 2 {
		t.Errorf("ABAStack under the ABA schedule: G1 %v, then %d granted; want true, then 2 (the model: 4)", g1, after)
	}
	t.Logf("ABAStack under the ABA schedule: the pool grants %d retries a round where the model grants 4", after)

	t.Run("twin concurrent", func(t *testing.T) {
		const pool = 4
		b := NewTaggedStack(TaggedStackModel)
		var out atomic.Int64 // tokens granted and not yet given back
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 3))
				held := 0
				for range 20_000 {
					if held > 0 && r.IntN(2) == 0 {
						held--
						out.Add(-1) // before the token is back, so a grant never counts it twice
						b.Success(budget.Throttled)
						continue
					}
					if b.Retry(budget.Transient) {
						held++
						if n := out.Add(1); n > pool {
							t.Errorf("%d tokens out of a pool of %d", n, pool)
						}
					}
					if r.IntN(16) == 0 {
						b.Success(budget.FirstAttempt) // earns nothing
					}
				}
				for ; held > 0; held-- {
					out.Add(-1)
					b.Success(budget.Transient)
				}
			})
		}
		wg.Wait()
		if got := grants(b, budget.Transient, 100); got != pool {
			t.Errorf("after the run, %d retries granted from the pool, want %d", got, pool)
		}
	})
}

// ---------------------------------------------------------------------------
// Class 5: a keyed budget's eviction.

func TestKeyedEviction(t *testing.T) {
	t.Parallel()
	t.Run("ordinary", func(t *testing.T) {
		ordinaryFollows(t, EvictFullQuotaModel, false, time.Second, NewEvictFullQuotaView)
		ordinaryFollows(t, SafeKeyedModel, false, time.Second, NewSafeKeyedView)
	})
	t.Run("twin wild", func(t *testing.T) { twinFollows(t, SafeKeyedModel, false, NewSafeKeyedView) })

	// Key "a" is held by a Retry that waits in its clock reading (after
	// taking a's quota from the map, before charging it) while keys "b" and
	// "c" arrive in a budget bounded to 2 keys. The model of "a": 10 tokens,
	// 2 a retry: that Retry and 4 more are granted.
	type keyed interface{ Budget(string) budget.Budget }
	demo := func(newK func(budget.Clock) keyed) (first bool, more int) {
		synctest.Test(t, func(t *testing.T) {
			clk := &gateClock{gate: make(chan struct{})}
			k := newK(clk)
			a := k.Budget("a")
			clk.armed.Store(true)
			done := make(chan struct{})
			go func() { defer close(done); first = a.Retry(budget.Transient) }()
			synctest.Wait()
			k.Budget("b").Request()
			k.Budget("c").Request() // the bound is reached: the least recently used full quota goes
			close(clk.gate)
			<-done
			more = grants(a, budget.Transient, 100)
		})
		return first, more
	}
	first, more := demo(func(c budget.Clock) keyed { return NewSafeKeyed(SafeKeyedModel, 2, c) })
	if !first || more != 4 {
		t.Errorf("SafeKeyed: first retry %v, then %d granted; want true, then 4", first, more)
	}
	first, more = demo(func(c budget.Clock) keyed { return NewEvictFullQuota(EvictFullQuotaModel, 2, c) })
	if !first || more != 5 {
		t.Errorf("EvictFullQuota: first retry %v, then %d granted; want true, then 5 (the first charge lost)", first, more)
	}
	t.Logf("EvictFullQuota: the retry racing the drop was granted, then %d more (the model: 4)", more)

	t.Run("twin concurrent", func(t *testing.T) {
		k := NewSafeKeyed(SafeKeyedModel, 2, budget.NewMonotonicClock())
		a := k.Budget("a")
		var out atomic.Int64 // a's retries granted and not yet refunded
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Go(func() {
				other := k.Budget(fmt.Sprintf("k%d", g%3))
				for range 5_000 {
					other.Request()
					if a.Retry(budget.Transient) {
						if n := out.Add(1); n > 5 {
							t.Errorf("%d retries of key a out at once, want at most 5", n)
						}
						out.Add(-1)
						a.Success(budget.Transient)
					}
				}
			})
		}
		wg.Wait()
		if got := grants(a, budget.Transient, 100); got != 5 {
			t.Errorf("after the run, key a grants %d retries, want 5", got)
		}
	})
}

// ---------------------------------------------------------------------------
// Class 6: a keyed in-flight budget's idle eviction.

func TestKeyedInFlight(t *testing.T) {
	t.Parallel()
	evict := func(c budget.Clock) budget.Budget { return NewEvictIdleInFlightView(c) }
	safe := func(c budget.Clock) budget.Budget { return NewSafeKeyedInFlightView(c) }
	t.Run("ordinary", func(t *testing.T) {
		// 300 steps of at most 100 ms: no call outlives the minute's timeout.
		ordinaryFollows(t, EvictIdleInFlightModel, true, 100*time.Millisecond, evict)
		ordinaryFollows(t, SafeKeyedInFlightModel, true, 100*time.Millisecond, safe)
	})
	t.Run("twin wild", func(t *testing.T) { twinFollows(t, SafeKeyedInFlightModel, true, safe) })

	// One call in flight with 3 retries in flight (the minimum): a 4th is
	// denied. Nothing starts for 61 s; the call is still in flight, so a
	// retry is still denied.
	ops := concat([]model.Op{model.OpRequest}, repeat(4, transient), []model.Op{model.OpAdvance(61 * time.Second), transient})
	if msg := lockstep(SafeKeyedInFlightModel, 0, safe, ops); msg != "" {
		t.Errorf("SafeKeyedInFlight: %s", msg)
	}
	msg := lockstep(EvictIdleInFlightModel, 0, evict, ops)
	if !strings.Contains(msg, "op 6 ") || !strings.Contains(msg, "budget says true, model false") {
		t.Errorf("EvictIdleInFlight: want the retry after 61 s granted where the model denies it, got %q", msg)
	}
	t.Log("EvictIdleInFlight:", msg)

	// The twin still drops keys with nothing in flight.
	clk := new(budget.ManualClock)
	k := NewSafeKeyedInFlight(SafeKeyedInFlightModel, time.Minute, clk)
	for _, key := range []string{"x", "y", "z"} {
		b := k.Budget(key)
		b.Request()
		b.CallEnd()
	}
	busy := k.Budget("busy")
	busy.Request()
	clk.Advance(2 * time.Minute)
	k.Budget("x").Request()
	if got := k.Len(); got != 2 {
		t.Errorf("SafeKeyedInFlight holds %d keys after the idle ones went, want 2 (busy and x)", got)
	}
}

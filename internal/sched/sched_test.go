package sched_test

import (
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/sched"
)

// counter is a check-then-act written as instrumented code would be: a
// load, then an add, each a yield point. Two takes of the last unit both
// succeed when a switch falls between them.
type counter struct{ n atomic.Int64 }

func (c *counter) take() bool {
	if sched.P(&c.n).Load() <= 0 {
		return false
	}
	sched.P(&c.n).Add(-1)
	return true
}

// overspend runs two takes of one unit under opt and reports whether both
// were granted.
func overspend(opt sched.Options) (bool, sched.Report) {
	c := new(counter)
	c.n.Store(1)
	var granted atomic.Int32
	take := func() {
		if c.take() {
			granted.Add(1)
		}
	}
	rep := sched.Run(opt, take, take)
	return granted.Load() == 2, rep
}

// Both strategies find the check-then-act within a few seeds, and the
// schedule of a failing run replays it every time, choice for choice.
func TestRunFindsACheckThenActAndReplaysIt(t *testing.T) {
	for _, st := range []sched.Strategy{sched.Walk(), sched.PCT(2)} {
		var found *sched.Report
		for seed := uint64(1); seed <= 50 && found == nil; seed++ {
			if bad, rep := overspend(sched.Options{Seed: seed, Strategy: st, Length: 6}); bad {
				found = &rep
			}
		}
		if found == nil {
			t.Fatalf("%v: no overspend in 50 seeds", st)
		}
		if found.Free || found.Diverged {
			t.Fatalf("%v: %v", st, found)
		}
		for range 20 {
			bad, rep := overspend(found.Options)
			if !bad || rep.Diverged || !slices.Equal(rep.Options.Schedule, found.Options.Schedule) {
				t.Fatalf("%v: replaying %v gave overspend=%v, %v", st, found, bad, rep)
			}
		}
		// The printed options read back to the same run.
		o, err := sched.ParseOptions(found.Options.String())
		if err != nil {
			t.Fatal(err)
		}
		if bad, _ := overspend(o); !bad {
			t.Errorf("%v: the parsed options %v did not overspend", st, o)
		}
	}
}

// A goroutine that finds an instrumented mutex held passes the baton, and
// the mutex still excludes: a yield point inside the critical section
// never lets another goroutine in.
func TestRunModelsAMutex(t *testing.T) {
	for seed := range uint64(30) {
		var mu sync.Mutex
		var inside, worst atomic.Int32
		f := func() {
			for range 5 {
				sched.Hook.M(&mu).Lock()
				worst.Store(max(worst.Load(), inside.Add(1)))
				sched.Hook.Point()
				inside.Add(-1)
				sched.Hook.M(&mu).Unlock()
			}
		}
		rep := sched.Run(sched.Options{Seed: seed, Strategy: sched.Walk()}, f, f, f)
		if rep.Free || worst.Load() != 1 {
			t.Fatalf("seed %d: %d inside at once, %v", seed, worst.Load(), rep)
		}
	}
}

// A full buffered channel passes the baton to the receiver instead of
// deadlocking.
func TestRunModelsAChannel(t *testing.T) {
	for seed := range uint64(30) {
		ch := make(chan int, 1)
		var sum atomic.Int64
		send := func() {
			for i := range 10 {
				sched.Send(ch, i)
			}
		}
		recv := func() {
			for range 10 {
				sum.Add(int64(sched.Recv(ch)))
			}
		}
		rep := sched.Run(sched.Options{Seed: seed, Strategy: sched.PCT(3), Length: 40}, send, recv)
		if rep.Free || sum.Load() != 45 {
			t.Fatalf("seed %d: sum %d, %v", seed, sum.Load(), rep)
		}
	}
}

// A goroutine under control that waits for one that is not (a budget's own
// goroutine) is polled until it can go on.
func TestRunPollsForAGoroutineOutsideControl(t *testing.T) {
	ch := make(chan int)
	go func() {
		time.Sleep(10 * time.Millisecond)
		ch <- 1
	}()
	var got int
	rep := sched.Run(sched.Options{Seed: 1}, func() { got = sched.Recv(ch) })
	if got != 1 || rep.Free {
		t.Fatalf("got %d, %v", got, rep)
	}
}

// A goroutine that blocks outside instrumented code, waiting for another
// under control, makes the run fall back to free running, and the report
// says so.
func TestRunFallsBackWhenBlockedOutside(t *testing.T) {
	ch := make(chan int) // the raw operations below are not yield points
	rep := sched.Run(sched.Options{Seed: 1, Stall: 100 * time.Millisecond},
		func() { <-ch }, func() { sched.Hook.Point(); ch <- 1 })
	if !rep.Free || !strings.Contains(rep.Reason, "made progress") {
		t.Fatalf("%v, want a fallback", rep)
	}
}

// Outside a controlled run the hooks are the operations themselves.
func TestHooksOutsideARun(t *testing.T) {
	var n atomic.Int64
	sched.P(&n).Add(2)
	var mu sync.RWMutex
	sched.Hook.RW(&mu).RLock()
	if sched.Hook.RW(&mu).TryLock() {
		t.Error("TryLock succeeded under a read lock")
	}
	sched.Hook.RW(&mu).RUnlock()
	ch := make(chan int64, 1)
	sched.Send(ch, n.Load())
	if v, ok := sched.Recv2(ch); v != 2 || !ok {
		t.Errorf("Recv2 = %d, %v", v, ok)
	}
}

func TestParseOptionsRejectsBadInput(t *testing.T) {
	for _, s := range []string{"", "pct0", "pct", "rand", "walk,seed=x", "walk,seed", "pct2,schedule=1*0", "pct2,schedule=a*1", "walk,length=-1", "walk,maxsteps=-1", "walk,maxsteps=x", "walk,color=red"} {
		if _, err := sched.ParseOptions(s); err == nil {
			t.Errorf("ParseOptions(%q) accepted", s)
		}
	}
	o := sched.Options{Seed: 9, Strategy: sched.PCT(4), Length: 12, MaxSteps: 500, Schedule: []int{0, 0, 1, 2, 2, 2}}
	if got, err := sched.ParseOptions(o.String()); err != nil || got.String() != o.String() {
		t.Errorf("ParseOptions(%q) = %v, %v", o.String(), got, err)
	}
}

// A schedule that names a goroutine which cannot run (here, one that has
// returned) is not followed there, and the report says the run diverged.
func TestReplayDivergesOnOtherCode(t *testing.T) {
	short := func() { sched.Hook.Point() }
	long := func() {
		for range 5 {
			sched.Hook.Point()
		}
	}
	rep := sched.Run(sched.Options{Seed: 1, Schedule: []int{0, 0, 0, 0, 0, 0, 0, 0}}, short, long)
	if !rep.Diverged {
		t.Errorf("%v: want a divergence", rep)
	}
	same := sched.Run(sched.Options{Seed: 1, Strategy: sched.Walk()}, short, long)
	again := sched.Run(same.Options, short, long)
	if again.Diverged || !slices.Equal(again.Options.Schedule, same.Options.Schedule) {
		t.Errorf("replaying %v gave %v", same, again)
	}
}

// Without change points PCT runs the goroutine of highest priority to its
// end: one switch, whatever the number of yield points.
func TestPCTOfDepthOneNeverPreempts(t *testing.T) {
	f := func() {
		for range 20 {
			sched.Hook.Point()
		}
	}
	for seed := range uint64(10) {
		rep := sched.Run(sched.Options{Seed: seed, Strategy: sched.PCT(1)}, f, f, f)
		switches := 0
		for i := 1; i < len(rep.Options.Schedule); i++ {
			if rep.Options.Schedule[i] != rep.Options.Schedule[i-1] {
				switches++
			}
		}
		if switches != 2 {
			t.Errorf("seed %d: %d switches in %v, want 2", seed, switches, rep)
		}
	}
}

// A sleep inside Outside does not make the run fall back, though no yield
// point is reached meanwhile.
func TestOutsideIsNotAStall(t *testing.T) {
	rep := sched.Run(sched.Options{Seed: 1, Stall: 40 * time.Millisecond},
		func() { sched.Hook.Outside(func() { time.Sleep(200 * time.Millisecond) }) }, func() { sched.Hook.Point() })
	if rep.Free {
		t.Errorf("%v: fell back during Outside", rep)
	}
}

func TestRunOfNothing(t *testing.T) {
	if rep := sched.Run(sched.Options{}); rep.Free || len(rep.Options.Schedule) != 0 {
		t.Errorf("Run() = %v", rep)
	}
}

// Serial never preempts: a goroutine runs on until it returns, so the
// check-then-act never shows, no step is a preemption, and its options
// read back.
func TestSerialNeverPreempts(t *testing.T) {
	for seed := range uint64(20) {
		bad, rep := overspend(sched.Options{Seed: seed, Strategy: sched.Serial()})
		if bad || len(rep.Preemptions) > 0 || rep.Free {
			t.Fatalf("seed %d: overspend=%v, %v", seed, bad, rep)
		}
	}
	o, err := sched.ParseOptions("serial,seed=3")
	if err != nil || o.Strategy != sched.Serial() || o.String() != "serial,seed=3" {
		t.Fatalf("ParseOptions(serial,seed=3) = %v, %v", o, err)
	}
}

// A goroutine outside control that keeps completing channel operations
// wakes the blocked goroutine under control again and again; as it gets
// nowhere, the run still falls back, instead of passing the baton around
// for as long as the outside goroutine runs. (With one goroutine under
// control the run's own stall check catches this too, so the test also
// passes on the watchdog before it stopped counting polling as progress:
// it guards the fallback, not that change.)
func TestRunFallsBackWhenWokenWithoutProgress(t *testing.T) {
	ch := make(chan int)
	stop := make(chan struct{})
	go func() {
		other := make(chan int, 1)
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			sched.Send(other, 1) // released(): wakes the blocked ones
			<-other
		}
		ch <- 1
		close(stop)
	}()
	rep := sched.Run(sched.Options{Seed: 1, Stall: 100 * time.Millisecond}, func() { sched.Recv(ch) })
	<-stop
	if !rep.Free || rep.Reason == "" {
		t.Fatalf("%v, want a fallback", rep)
	}
}

// A store into a field (W) begins a step that touches anything outside a
// critical section, and only what the mutex guards inside one; a field's
// value read (P) begins a local step. An exhaustive search leans on these
// objects: a store taken for a local step outside a lock would never be
// ordered after another goroutine's read.
func TestStoreStepObjects(t *testing.T) {
	var mu sync.Mutex
	var n int64
	rep := sched.Run(sched.Options{Strategy: sched.Serial(), Choices: true}, func() {
		n = sched.W(n + 1)
		_ = sched.P(n)
		sched.Hook.M(&mu).Lock()
		n = sched.W(n + 1)
		sched.Hook.M(&mu).Unlock()
	})
	if rep.Free || len(rep.Choices) < 5 {
		t.Fatalf("%v: %d choices", rep, len(rep.Choices))
	}
	// Choice 0 starts the function, 1 and 2 begin the steps after the
	// first store and the read, the Lock's follow, and the last begins the
	// step after the store under the lock.
	objs := []uintptr{rep.Choices[1].Obj, rep.Choices[2].Obj, rep.Choices[len(rep.Choices)-1].Obj}
	if objs[0] != 0 || objs[1] != 1 || objs[2] != 1 {
		t.Errorf("objects of the steps after a store, a read and a store under a lock = %v, want [0 1 1]", objs)
	}
}

// A store outside any critical section, inside an operation (a Tag not
// zero), is marked Unguarded; one under a lock, or outside an operation
// (a constructor's), is not. An exhaustive search that sees the mark stops
// taking critical sections to commute with the other goroutines' steps.
func TestUnguardedStore(t *testing.T) {
	var mu sync.Mutex
	var n int64
	rep := sched.Run(sched.Options{Strategy: sched.Serial(), Choices: true}, func() {
		n = sched.W(n + 1) // no tag: a constructor's store
		sched.Hook.Tag(1)
		sched.Hook.M(&mu).Lock()
		n = sched.W(n + 1)
		sched.Hook.M(&mu).Unlock()
		n = sched.W(n + 1) // the operation's store outside the lock
		sched.Hook.Tag(0)
		n = sched.W(n + 1)
	})
	if rep.Free {
		t.Fatalf("%v", rep)
	}
	var marks []bool
	for _, c := range rep.Choices {
		if c.Obj == 0 || c.Obj == 1 { // the steps that W and the Lock begin
			marks = append(marks, c.Unguarded)
		}
	}
	got := 0
	for _, m := range marks {
		if m {
			got++
		}
	}
	if got != 1 {
		t.Errorf("%d steps marked Unguarded of %v, want 1: the tagged store outside the lock", got, marks)
	}
}

// A goroutine at AwaitClose is Waiting at every choice until the gate's
// Close, however many unlocks of the other goroutine wake it meanwhile,
// and not after: an exhaustive search need not try it at the gate, and
// must try it once the gate is open.
func TestAwaitCloseIsWaitingUntilClose(t *testing.T) {
	var mu sync.Mutex
	var n int64
	gate := make(chan struct{})
	rep := sched.Run(sched.Options{Strategy: sched.Serial(), Choices: true, Schedule: []int{1, 1}}, func() {
		for range 5 {
			n = sched.W(n + 1) // a store outside a lock: a step of unknown object
			sched.Hook.M(&mu).Lock()
			n = sched.W(n + 1)
			sched.Hook.M(&mu).Unlock() // wakes every blocked goroutine
		}
		sched.Close(gate)
		for range 3 {
			sched.Hook.M(&mu).Lock()
			n++
			sched.Hook.M(&mu).Unlock()
		}
	}, func() {
		sched.AwaitClose(gate)
		sched.Hook.M(&mu).Lock()
		n++
		sched.Hook.M(&mu).Unlock()
	})
	if rep.Free || rep.Diverged {
		t.Fatalf("%v", rep)
	}
	// The choices, past goroutine 2's two steps to the gate, at which it
	// could have run while goroutine 1 did: W for Waiting, R for not.
	var seen strings.Builder
	for i, c := range rep.Choices[2:] {
		if rep.Options.Schedule[i+2] == 1 {
			break
		}
		if c.Ready&2 != 0 {
			seen.WriteByte("RW"[min(c.Waiting&2, 1)])
		}
	}
	if ok, _ := regexp.MatchString(`^W{5,}R{3,}$`, seen.String()); !ok {
		t.Errorf("goroutine 2 at the choices where it was ready before it ran: %s, want at least five Waiting (W), at the unlocks before the gate opened, then at least three not (R)", seen.String())
	}
}

// With Options.Alone, a goroutine inside Hook.Alone while the others wait
// at a gate takes no steps: the schedule holds none of its yield points
// there. Without the option, or once it starts a goroutine of its own,
// they are steps.
func TestAloneTakesNoSteps(t *testing.T) {
	run := func(alone, spawn bool) sched.Report {
		var mu sync.Mutex
		var n int64
		gate := make(chan struct{})
		return sched.Run(sched.Options{Strategy: sched.Serial(), Choices: true, Alone: alone, Schedule: []int{1, 1}}, func() {
			sched.Hook.Alone(func() {
				if spawn {
					sched.Hook.Go(func() {
						sched.Hook.M(&mu).Lock()
						n++
						sched.Hook.M(&mu).Unlock()
					})
				}
				for range 10 {
					sched.Hook.M(&mu).Lock()
					n = sched.W(n + 1)
					sched.Hook.M(&mu).Unlock()
				}
			})
			sched.Close(gate)
		}, func() {
			sched.AwaitClose(gate)
		})
	}
	plain, alone, spawned := run(false, false), run(true, false), run(true, true)
	for _, r := range []sched.Report{plain, alone, spawned} {
		if r.Free || r.Diverged {
			t.Fatalf("%v", r)
		}
	}
	if len(plain.Options.Schedule) < 20 {
		t.Fatalf("%d steps without Alone, want at least 20: the test shows nothing", len(plain.Options.Schedule))
	}
	if len(alone.Options.Schedule) > 8 {
		t.Errorf("%d steps with Alone, want a few (the gate's, the close's, the returns): %v", len(alone.Options.Schedule), alone)
	}
	if len(spawned.Options.Schedule) < 20 {
		t.Errorf("%d steps with Alone after a goroutine was started, want every yield point a step", len(spawned.Options.Schedule))
	}
	if !strings.Contains(alone.Options.String(), "alone=1") {
		t.Errorf("the options %q do not say alone: a replay would not follow the schedule", alone.Options)
	}
	if o, err := sched.ParseOptions(alone.Options.String()); err != nil || !o.Alone {
		t.Errorf("ParseOptions(%q) = %+v, %v; want Alone", alone.Options, o, err)
	}
}

// The yield points Alone passes count towards the step bound: a
// goroutine that spins alone reaches it, and the run falls back.
func TestAloneKeepsTheStepBound(t *testing.T) {
	var flag atomic.Bool
	gate := make(chan struct{})
	rep := sched.Run(sched.Options{Strategy: sched.Serial(), Alone: true, MaxSteps: 500, Schedule: []int{1, 1}}, func() {
		sched.Hook.Alone(func() {
			for i := 0; i < 10_000 && !sched.P(&flag).Load(); i++ { // nobody sets it meanwhile
			}
		})
		sched.Close(gate)
	}, func() {
		sched.AwaitClose(gate)
		flag.Store(true)
	})
	if !rep.Exhausted {
		t.Errorf("%v: want the step bound reached", rep)
	}
}

// Settle lets the goroutines that can run go until they block, before the
// caller goes on, and its switches are no preemptions; a goroutine at a
// gate is left waiting. Without Options.Alone it does nothing.
func TestSettleRunsTheOthersUntilTheyBlock(t *testing.T) {
	run := func(alone bool) (sched.Report, []string) {
		var mu sync.Mutex
		var order []string
		note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
		gate, idle := make(chan struct{}), make(chan struct{})
		rep := sched.Run(sched.Options{Strategy: sched.Serial(), Choices: true, Alone: alone, Schedule: []int{1, 1}}, func() {
			sched.Hook.Go(func() {
				note("spawned")
				sched.Recv(idle) // blocks until the end
			})
			sched.Hook.Settle()
			note("settled")
			sched.Close(gate)
			sched.Close(idle)
		}, func() {
			sched.AwaitClose(gate)
		})
		// Without Alone the spawned goroutine may run only after the run
		// has ended: its note is taken under the lock.
		mu.Lock()
		defer mu.Unlock()
		return rep, slices.Clone(order)
	}
	rep, order := run(true)
	if rep.Free || len(rep.Preemptions) > 0 {
		t.Fatalf("%v: want a controlled run without preemptions", rep)
	}
	if !slices.Equal(order, []string{"spawned", "settled"}) {
		t.Errorf("with Alone: %v, want the spawned goroutine first", order)
	}
	if _, order := run(false); !slices.Equal(order[:1], []string{"settled"}) {
		t.Errorf("without Alone: %v, want the caller first (serial order)", order)
	}
}

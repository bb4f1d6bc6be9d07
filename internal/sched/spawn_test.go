package sched_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/sched"
)

// actor is a budget that serves takes from a goroutine of its own, as
// rewritten code would spell it: the goroutine is started with sched.Go,
// its loop is a select, and requests and replies go over unbuffered
// channels.
type actor struct {
	req    chan chan bool
	stop   chan struct{}
	done   chan struct{}
	tokens int
}

func newActor(tokens int) *actor {
	a := &actor{req: make(chan chan bool), stop: make(chan struct{}), done: make(chan struct{}), tokens: tokens}
	sched.Hook.Go(a.loop)
	return a
}

func (a *actor) loop() {
	defer close(a.done)
	for {
		switch c0, c1 := sched.R(a.req), sched.R(a.stop); sched.Hook.Select(false, c0, c1) {
		case 0:
			ok := a.tokens > 0
			if ok {
				a.tokens--
			}
			sched.Send(c0.V, ok)
		case 1:
			return
		}
	}
}

func (a *actor) take() bool {
	reply := make(chan bool)
	sched.Send(a.req, reply)
	return sched.Recv(reply)
}

// runActor builds an actor of 2 tokens in goroutine 0 of a controlled run
// and has 3 goroutines take from it, the builder included.
func runActor(t *testing.T, opt sched.Options) (int32, sched.Report) {
	t.Helper()
	var a *actor
	ready := make(chan struct{})
	var granted atomic.Int32
	take := func() {
		if a.take() {
			granted.Add(1)
		}
	}
	rep := sched.Run(opt,
		func() { a = newActor(2); sched.Close(ready); take() },
		func() { sched.Recv(ready); take() },
		func() { sched.Recv(ready); take() },
	)
	close(a.stop)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the actor did not stop after the run; %v", rep)
	}
	return granted.Load(), rep
}

// A goroutine the code under control starts is scheduled too: its
// choices are in the schedule, rendezvous on unbuffered channels and a
// select loop hand the baton over without a fallback, and the run
// replays choice by choice.
func TestGoSchedulesTheGoroutinesARunStarts(t *testing.T) {
	for _, st := range []sched.Strategy{sched.Walk(), sched.PCT(3)} {
		for seed := range uint64(20) {
			n, rep := runActor(t, sched.Options{Seed: seed, Strategy: st, Length: 60})
			if rep.Free || n != 2 {
				t.Fatalf("%v seed %d: %d granted of 2, %v", st, seed, n, rep)
			}
			if !slices.Contains(rep.Options.Schedule, 3) {
				t.Fatalf("%v seed %d: the actor, goroutine 3, never chose to run: %v", st, seed, rep)
			}
			for range 3 {
				_, again := runActor(t, rep.Options)
				if again.Diverged || !slices.Equal(again.Options.Schedule, rep.Options.Schedule) {
					t.Fatalf("%v seed %d: the replay of %v gave %v", st, seed, rep, again)
				}
			}
		}
	}
}

// refiller is a bucket whose refill goroutine adds a token with a load
// and a store: a take between the two is lost. Only a scheduler that
// controls the refill goroutine can put a take there on purpose.
type refiller struct{ n atomic.Int64 }

func (b *refiller) refill(rounds int, done chan<- struct{}) {
	for range rounds {
		v := sched.P(&b.n).Load()
		sched.P(&b.n).Store(v + 1)
	}
	sched.Close(done)
}

func (b *refiller) take() {
	sched.P(&b.n).Add(-1)
}

func lostTake(opt sched.Options) (bool, sched.Report) {
	b := new(refiller)
	b.n.Store(5)
	done := make(chan struct{})
	rep := sched.Run(opt,
		func() { sched.Hook.Go(func() { b.refill(3, done) }); b.take(); sched.Recv(done) },
		func() { b.take() },
	)
	return b.n.Load() != 5+3-2, rep
}

func TestGoFindsABugInTheGoroutineARunStarts(t *testing.T) {
	for _, st := range []sched.Strategy{sched.Walk(), sched.PCT(2)} {
		var found *sched.Report
		for seed := uint64(1); seed <= 100 && found == nil; seed++ {
			if bad, rep := lostTake(sched.Options{Seed: seed, Strategy: st, Length: 20}); bad {
				found = &rep
			}
		}
		if found == nil {
			t.Fatalf("%v: no lost take in 100 seeds", st)
		}
		if found.Free {
			t.Fatalf("%v: %v", st, found)
		}
		for range 20 {
			if bad, rep := lostTake(found.Options); !bad || rep.Diverged {
				t.Fatalf("%v: replaying %v gave lost=%v, %v", st, found, bad, rep)
			}
		}
	}
}

// A goroutine started by an earlier run that still runs, freely, calls
// the hooks during a later run without being taken for the later run's
// goroutines.
func TestGoLeftoverGoroutineStaysOutOfTheNextRun(t *testing.T) {
	stop := make(chan struct{})
	stopped := make(chan struct{})
	var spins atomic.Int64
	sched.Run(sched.Options{Seed: 1}, func() {
		sched.Hook.Go(func() {
			defer close(stopped)
			for {
				if sched.Hook.Select(true, sched.R(stop)) == 0 {
					return
				}
				sched.P(&spins).Add(1)
			}
		})
	})
	defer func() {
		close(stop)
		<-stopped
	}()
	// Ten seeds at least, and more until the leftover goroutine is seen
	// to run while they do: on a loaded machine the Go scheduler may give
	// it no turn during the first ten, and a test whose leftover never
	// ran would prove nothing.
	deadline := time.Now().Add(10 * time.Second)
	for seed := uint64(0); ; seed++ {
		before := spins.Load()
		opt := sched.Options{Seed: seed, Strategy: sched.Walk(), Length: 60}
		_, first := runActor(t, opt)
		for range 3 {
			n, rep := runActor(t, opt)
			if n != 2 || rep.Free || rep.Diverged || !slices.Equal(rep.Options.Schedule, first.Options.Schedule) {
				t.Fatalf("seed %d: %d granted, %v, then %v", seed, n, first, rep)
			}
		}
		if seed >= 9 && spins.Load() > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leftover goroutine never ran during a later run (%d seeds, %d of its loops in all)", seed+1, spins.Load())
		}
	}
}

// A Do while another goroutine under control is inside Do of the same
// Once passes the baton; f runs once and every Do returns after it.
func TestOnceModelsDo(t *testing.T) {
	for seed := range uint64(30) {
		var once sync.Once
		var calls, ready, sawReady atomic.Int32
		f := func() {
			calls.Add(1)
			sched.Hook.Point()
			ready.Store(1)
		}
		do := func() {
			sched.Hook.O(&once).Do(f)
			sawReady.Add(ready.Load())
		}
		rep := sched.Run(sched.Options{Seed: seed, Strategy: sched.Walk()}, do, do, do)
		if rep.Free || calls.Load() != 1 || sawReady.Load() != 3 {
			t.Fatalf("seed %d: %d calls, %d of 3 saw f done, %v", seed, calls.Load(), sawReady.Load(), rep)
		}
	}
}

// A loop polling a channel with a default case lets the sender run.
func TestSelectWithDefaultLetsTheOthersRun(t *testing.T) {
	for _, st := range []sched.Strategy{sched.Walk(), sched.PCT(3)} {
		for seed := range uint64(20) {
			ch := make(chan int)
			var got, polls int
			rep := sched.Run(sched.Options{Seed: seed, Strategy: st},
				func() {
					for {
						c := sched.R(ch)
						if sched.Hook.Select(true, c) == 0 {
							got = c.V
							return
						}
						polls++
					}
				},
				func() { sched.Send(ch, 7) },
			)
			if rep.Free || got != 7 {
				t.Fatalf("%v seed %d: got %d after %d polls, %v", st, seed, got, polls, rep)
			}
		}
	}
}

// A select with a default case inside a critical section, while the
// others wait for the lock, goes on as soon as they have blocked: the run
// never waits in real time (x/sync/semaphore's Acquire checks its
// context so, holding its mutex; each such wait cost a run a timer's
// sleep, and a budget built on it a minute of its controlled stage).
func TestSelectWithDefaultInsideALockCostsNoPoll(t *testing.T) {
	for _, st := range []sched.Strategy{sched.Walk(), sched.PCT(3)} {
		for seed := range uint64(20) {
			var mu sync.Mutex
			never := make(chan struct{})
			n := 0
			inside := func() {
				for range 3 {
					sched.Hook.M(&mu).Lock()
					if sched.Hook.Select(true, sched.R(never)) != -1 {
						panic("a receive from a channel nobody sends on")
					}
					n++
					sched.Hook.M(&mu).Unlock()
				}
			}
			rep := sched.Run(sched.Options{Seed: seed, Strategy: st}, inside, inside, inside)
			if rep.Free || n != 9 {
				t.Fatalf("%v seed %d: %d sections, %v", st, seed, n, rep)
			}
			if rep.Polls != 0 {
				t.Fatalf("%v seed %d: the run waited %d times in real time for goroutines that only waited for one under control", st, seed, rep.Polls)
			}
		}
	}
}

// When every goroutine under control waits for a lock held outside
// control, the run polls until it is released (Report.Polls counts it).
// The lock is released 5ms after the goroutine is about to take it; on a
// loaded machine the goroutine can be descheduled for longer than that
// and find it free, so a few attempts are made: one must poll.
func TestBlockedOnALockHeldOutsideControlPolls(t *testing.T) {
	var last sched.Report
	for range 10 {
		var mu sync.Mutex
		mu.Lock()
		trying := make(chan struct{})
		go func() {
			<-trying
			time.Sleep(5 * time.Millisecond)
			mu.Unlock()
		}()
		entered := false
		rep := sched.Run(sched.Options{Seed: 1}, func() {
			close(trying)
			sched.Hook.M(&mu).Lock()
			entered = true
			sched.Hook.M(&mu).Unlock()
		})
		if rep.Free || !entered {
			t.Fatalf("a lock released outside control after 5ms: %v, entered %v", rep, entered)
		}
		if rep.Polls > 0 {
			return
		}
		last = rep
	}
	t.Fatalf("a lock released outside control 5ms after the goroutine tried it, ten times: never polled (last: %v)", last)
}

// Outside a controlled run, Select is a select statement.
func TestSelectOutsideARun(t *testing.T) {
	full := make(chan int, 1)
	full <- 3
	empty := make(chan int)
	c0, c1 := sched.R(empty), sched.R(full)
	if i := sched.Hook.Select(false, c0, c1); i != 1 || c1.V != 3 || !c1.OK {
		t.Fatalf("Select = %d, %+v", i, c1)
	}
	if i := sched.Hook.Select(true, sched.R(empty), sched.S(empty, 1)); i != -1 {
		t.Fatalf("Select of nothing ready = %d, want the default", i)
	}
	closed := make(chan error)
	close(closed)
	c := sched.R(closed)
	if i := sched.Hook.Select(false, c); i != 0 || c.OK || c.V != nil {
		t.Fatalf("Select of a closed channel = %d, %+v", i, c)
	}
	var nilCh chan int
	out := make(chan int, 1)
	if i := sched.Hook.Select(false, sched.S(nilCh, 1), sched.S(out, 2)); i != 1 || <-out != 2 {
		t.Fatalf("Select with a nil channel = %d", i)
	}
}

// A WaitGroup's goroutines are under control, and a Wait passes the baton
// until they are done, without falling back.
func TestWaitGroupUnderControl(t *testing.T) {
	for seed := range uint64(20) {
		var wg sync.WaitGroup
		var n atomic.Int64
		var after int64
		rep := sched.Run(sched.Options{Seed: seed, Strategy: sched.Walk()}, func() {
			for range 3 {
				sched.Hook.WG(&wg).Go(func() {
					sched.P(&n).Add(1)
					sched.Hook.Point()
					sched.P(&n).Add(1)
				})
			}
			sched.Hook.WG(&wg).Wait()
			after = n.Load()
		})
		if rep.Free || after != 6 {
			t.Fatalf("seed %d: %d after Wait, want 6; %v", seed, after, rep)
		}
		if !slices.ContainsFunc(rep.Options.Schedule, func(g int) bool { return g > 0 }) {
			t.Fatalf("seed %d: the workers were not scheduled: %v", seed, rep)
		}
	}
}

// A range over a channel, rewritten to Range, receives through the
// scheduler and keeps break.
func TestRangeUnderControl(t *testing.T) {
	for seed := range uint64(10) {
		ch := make(chan int)
		var sum, upTo3 int
		rep := sched.Run(sched.Options{Seed: seed, Strategy: sched.Walk()},
			func() {
				for i := range 5 {
					sched.Send(ch, i)
				}
				sched.Close(ch)
			},
			func() {
				for v := range sched.Range(ch) {
					sum += v
					if v == 3 {
						break
					}
				}
				for v := range sched.Range(ch) {
					upTo3 += v
				}
			},
		)
		if rep.Free || sum != 6 || upTo3 != 4 {
			t.Fatalf("seed %d: %d and %d, want 6 and 4; %v", seed, sum, upTo3, rep)
		}
	}
}

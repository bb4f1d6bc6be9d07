package sched_test

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/race"
	"github.com/retrybudget/retrybudget/internal/sched"
)

// strategies are those the spinning tests run under: PCT of each depth
// (its goroutine of highest priority is the one that would spin forever)
// and the random walk.
var strategies = []sched.Strategy{sched.PCT(1), sched.PCT(2), sched.PCT(3), sched.Walk()}

// guarded runs the functions of a test goroutine and fails t if they take
// longer than a minute: a spin that never hands the baton on would
// otherwise hang the test binary.
func guarded(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("still running after a minute")
	}
}

// spinCounter is a counter that three goroutines increment under a lock
// each, with a yield point between the read and the write: only a lock
// that excludes keeps every increment.
type spinCounter struct {
	n    int
	lock func()
	free func()
}

func (c *spinCounter) inc() {
	c.lock()
	v := c.n
	sched.Hook.Point()
	c.n = v + 1
	c.free()
}

// runCounter runs 3 goroutines of 4 increments each under opt, and
// returns the count and the report.
func runCounter(opt sched.Options, newLock func() (lock, unlock func())) (int, sched.Report) {
	c := new(spinCounter)
	c.lock, c.free = newLock()
	f := func() {
		for range 4 {
			c.inc()
		}
	}
	rep := sched.Run(opt, f, f, f)
	return c.n, rep
}

// spinsUnderControl checks that a counter under a lock of newLock, which
// spins, finishes with every increment under every strategy and 40 seeds,
// without falling back nor reaching the step bound, and that each run
// replays choice for choice.
func spinsUnderControl(t *testing.T, newLock func() (lock, unlock func())) {
	t.Helper()
	guarded(t, func() {
		for _, st := range strategies {
			for seed := range uint64(40) {
				opt := sched.Options{Seed: seed, Strategy: st, Length: 100, MaxSteps: 200_000}
				n, rep := runCounter(opt, newLock)
				if n != 12 || rep.Free || rep.Exhausted {
					t.Errorf("%v seed %d: %d increments of 12, %d steps; fell back: %v %s", st, seed, n, len(rep.Options.Schedule), rep.Free, rep.Reason)
					return
				}
				if seed%8 == 0 {
					n, again := runCounter(rep.Options, newLock)
					if n != 12 || again.Diverged || !slices.Equal(again.Options.Schedule, rep.Options.Schedule) {
						t.Errorf("%v seed %d: the replay gave %d increments, %d steps of %d, diverged %v", st, seed, n, len(again.Options.Schedule), len(rep.Options.Schedule), again.Diverged)
						return
					}
				}
			}
		}
	})
}

// A spin lock on an atomic flag that waits with Gosched hands the baton
// on: under PCT the goroutine of highest priority that spins does not
// keep it from the holder.
func TestSpinLockWithGosched(t *testing.T) {
	spinsUnderControl(t, func() (func(), func()) {
		var held atomic.Bool
		return func() {
				for !sched.P(&held).CompareAndSwap(false, true) {
					sched.Hook.Gosched()
				}
			}, func() {
				sched.P(&held).Store(false)
			}
	})
}

// So does one that retries its CompareAndSwap at once, in the function
// form on an int32 and in the method form on an atomic.Pointer: a run of
// failed ones, while nobody else writes, is spinning.
func TestSpinLockRetryingCompareAndSwap(t *testing.T) {
	spinsUnderControl(t, func() (func(), func()) {
		var held int32
		return func() {
				for !atomic.CompareAndSwapInt32(sched.P(&held), 0, 1) {
				}
			}, func() {
				atomic.StoreInt32(sched.P(&held), 0)
			}
	})
	spinsUnderControl(t, func() (func(), func()) {
		var owner atomic.Pointer[int]
		return func() {
				me := new(int)
				for !sched.P(&owner).CompareAndSwap(nil, me) {
				}
			}, func() {
				sched.P(&owner).Store(nil)
			}
	})
}

// And so does one that spins on TryLock, of a Mutex and of a RWMutex.
func TestSpinOnTryLock(t *testing.T) {
	spinsUnderControl(t, func() (func(), func()) {
		var mu sync.Mutex
		return func() {
				for !sched.Hook.M(&mu).TryLock() {
				}
			}, func() {
				sched.Hook.M(&mu).Unlock()
			}
	})
	spinsUnderControl(t, func() (func(), func()) {
		var mu sync.RWMutex
		return func() {
				for !sched.Hook.RW(&mu).TryLock() {
				}
			}, func() {
				sched.Hook.RW(&mu).Unlock()
			}
	})
}

// Readers that spin on TryRLock while a writer holds the RWMutex let it
// finish its write, and see it whole.
func TestSpinOnTryRLock(t *testing.T) {
	guarded(t, func() {
		for _, st := range strategies {
			for seed := range uint64(40) {
				var mu sync.RWMutex
				var a, b int
				var torn atomic.Bool
				writer := func() {
					for i := range 3 {
						sched.Hook.RW(&mu).Lock()
						a = i
						sched.Hook.Point()
						b = i
						sched.Hook.RW(&mu).Unlock()
					}
				}
				reader := func() {
					for range 3 {
						for !sched.Hook.RW(&mu).TryRLock() {
						}
						if a != b {
							torn.Store(true)
						}
						sched.Hook.RW(&mu).RUnlock()
					}
				}
				rep := sched.Run(sched.Options{Seed: seed, Strategy: st, Length: 60, MaxSteps: 100_000}, reader, writer, reader)
				if rep.Free || torn.Load() {
					t.Fatalf("%v seed %d: torn read %v; %v", st, seed, torn.Load(), rep)
				}
			}
		}
	})
}

// A goroutine that waits with loads for a flag another one sets after a
// few steps of its own hands the baton to it.
func TestSpinOnLoads(t *testing.T) {
	guarded(t, func() {
		for _, st := range strategies {
			for seed := range uint64(40) {
				var ready atomic.Int32
				var saw int32
				rep := sched.Run(sched.Options{Seed: seed, Strategy: st, MaxSteps: 100_000},
					func() {
						for sched.P(&ready).Load() == 0 {
						}
						saw = sched.P(&ready).Load()
					},
					func() {
						for range 10 {
							sched.Hook.Point()
						}
						sched.P(&ready).Store(7)
					})
				if saw != 7 || rep.Free {
					t.Fatalf("%v seed %d: saw %d; %v", st, seed, saw, rep)
				}
			}
		}
	})
}

// Gosched hands the baton on at once: a goroutine that waits for a flag
// it reads outside instrumented code, calling Gosched between reads, is
// chosen at most twice in a row (its Gosched, then its return to the
// loop) while the one that will set the flag can run.
func TestGoschedHandsOverAtOnce(t *testing.T) {
	guarded(t, func() {
		for _, st := range strategies {
			for seed := range uint64(20) {
				var flag atomic.Bool // read and written without hooks
				rep := sched.Run(sched.Options{Seed: seed, Strategy: st, Length: 40},
					func() {
						for !flag.Load() {
							sched.Hook.Gosched()
						}
					},
					func() {
						for range 10 {
							sched.Hook.Point()
						}
						flag.Store(true)
					})
				if rep.Free {
					t.Fatalf("%v seed %d: %v", st, seed, rep)
				}
				// The longest run of the spinner's choices before the
				// setter's last.
				s := rep.Options.Schedule
				end := 0
				for i, g := range s {
					if g == 1 {
						end = i
					}
				}
				longest, run := 0, 0
				for _, g := range s[:end] {
					if g == 0 {
						run++
						longest = max(longest, run)
					} else {
						run = 0
					}
				}
				if longest > 2 {
					t.Fatalf("%v seed %d: the spinner was chosen %d times in a row: %v", st, seed, longest, rep)
				}
			}
		}
	})
}

// A goroutine that spins waiting for one blocked on a channel that only a
// goroutine outside control sends on does not keep the blocked one from
// trying again: when every goroutine that can run spins, the blocked ones
// take their turn.
func TestSpinnerLetsABlockedGoroutineTryAgain(t *testing.T) {
	guarded(t, func() {
		for _, st := range strategies {
			for seed := range uint64(5) {
				ch := make(chan int)
				go func() {
					time.Sleep(2 * time.Millisecond)
					ch <- 5
				}()
				var got atomic.Int32
				var saw int32
				rep := sched.Run(sched.Options{Seed: seed, Strategy: st, MaxSteps: 500_000},
					func() {
						for sched.P(&got).Load() == 0 {
							sched.Hook.Gosched()
						}
						saw = sched.P(&got).Load()
					},
					func() { sched.P(&got).Store(int32(sched.Recv(ch))) })
				if saw != 5 || rep.Free {
					t.Fatalf("%v seed %d: saw %d; %v", st, seed, saw, rep)
				}
			}
		}
	})
}

// A run in which every goroutine spins forever under control, a
// livelock, ends at its step bound with a report that says so, and the
// schedule up to the bound. (The spinners give up once they have looped
// more times than the bound, which only running freely allows.)
func TestLivelockReachesTheStepBound(t *testing.T) {
	guarded(t, func() {
		for _, st := range strategies {
			var never atomic.Bool
			spinGosched := func() {
				for i := 0; !sched.P(&never).Load() && i <= 5000; i++ {
					sched.Hook.Gosched()
				}
			}
			spinCAS := func() {
				for i := 0; !sched.P(&never).CompareAndSwap(true, true) && i <= 5000; i++ {
				}
			}
			rep := sched.Run(sched.Options{Seed: 3, Strategy: st, MaxSteps: 5000}, spinGosched, spinCAS)
			if !rep.Exhausted || !rep.Free || !strings.Contains(rep.Reason, "step bound of 5000 exceeded") {
				t.Fatalf("%v: %v, want the step bound", st, rep)
			}
			if len(rep.Options.Schedule) != 5000 {
				t.Fatalf("%v: a schedule of %d steps, want the bound, 5000", st, len(rep.Options.Schedule))
			}
			if !slices.Contains(rep.Options.Schedule, 0) || !slices.Contains(rep.Options.Schedule, 1) {
				t.Fatalf("%v: a spinning goroutine kept the baton: %v", st, rep)
			}
			o, err := sched.ParseOptions(rep.Options.String())
			if err != nil || o.MaxSteps != 5000 {
				t.Fatalf("%v: the options %q read back as %v, %v", st, rep.Options, o, err)
			}
		}
	})
}

// Run returns a run that reached its step bound after Options.Stall of
// free running, though a goroutine of it still spins: a livelock is
// reported, not waited for.
func TestExhaustedRunReturnsWithoutItsSpinners(t *testing.T) {
	var stop atomic.Bool
	spun := make(chan struct{})
	defer func() {
		stop.Store(true)
		<-spun
	}()
	guarded(t, func() {
		start := time.Now()
		rep := sched.Run(sched.Options{Seed: 1, MaxSteps: 1000, Stall: 300 * time.Millisecond}, func() {
			defer close(spun)
			for !sched.P(&stop).Load() {
				sched.Hook.Gosched()
			}
		})
		if !rep.Exhausted || len(rep.Options.Schedule) != 1000 {
			t.Fatalf("%v, want the step bound", rep)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Errorf("Run returned after %v, before the Stall of free running", d)
		}
	})
}

// The default step bound holds a spinning run's memory: a goroutine that
// spins alone for a million steps records them and stops there.
func TestDefaultStepBoundHoldsMemory(t *testing.T) {
	if testing.Short() || race.Enabled {
		t.Skip("a million steps")
	}
	guarded(t, func() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var stop atomic.Bool
		rep := sched.Run(sched.Options{Seed: 1}, func() {
			for i := 0; !sched.P(&stop).Load() && i <= sched.DefaultMaxSteps; i++ {
				sched.Hook.Gosched()
			}
		})
		runtime.GC()
		runtime.ReadMemStats(&after)
		if !rep.Exhausted || len(rep.Options.Schedule) != sched.DefaultMaxSteps {
			t.Fatalf("%d steps, exhausted %v: %s", len(rep.Options.Schedule), rep.Exhausted, rep.Reason)
		}
		// The report holds the schedule, 8 bytes a step; the run held a byte
		// a step. Allow for the rest.
		if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 64<<20 {
			t.Fatalf("the heap grew by %d MB over a bounded run", grown>>20)
		}
		runtime.KeepAlive(rep)
	})
}

// A run whose control ended by a fallback, with a function still blocked
// outside instrumented code and goroutines it left behind still spinning,
// does not hold up the next run, and the leftovers do not disturb it: the
// next runs give the same schedules as they did before the leftovers
// were there, though the leftovers lock, unlock and close while a
// goroutine of the next run is blocked. One leftover is started by the
// other after the fallback.
func TestLeftoversOfAnAbandonedRunStayOut(t *testing.T) {
	var mu sync.Mutex
	poke := func() {} // has the leftovers unlock and close, when set
	runB := func(seed uint64) sched.Report {
		var inside atomic.Int32
		holder := func() {
			sched.Hook.M(&mu).Lock()
			inside.Add(1)
			for range 4 {
				sched.Hook.Point()
				poke()
			}
			inside.Add(-1)
			sched.Hook.M(&mu).Unlock()
		}
		waiter := func() {
			sched.Hook.Point()
			sched.Hook.M(&mu).Lock()
			if inside.Load() != 0 {
				panic("two goroutines inside the mutex")
			}
			sched.Hook.M(&mu).Unlock()
		}
		return sched.Run(sched.Options{Seed: seed, Strategy: sched.Walk()}, holder, waiter, waiter)
	}
	var baseline []sched.Report
	for seed := range uint64(10) {
		baseline = append(baseline, runB(seed))
	}

	// Run A: its function starts a goroutine and blocks on a channel that
	// is not rewritten; the goroutine, once free, starts another. Both
	// spin, and lock, unlock and close when poked. (The pokes and the
	// stop flag are raw operations, not yield points.)
	stuck := make(chan struct{})
	var stop atomic.Bool
	var spins [2]atomic.Int64
	pokes := [2]chan chan struct{}{make(chan chan struct{}), make(chan chan struct{})}
	var leftoversDone sync.WaitGroup
	leftoversDone.Add(2)
	churn := func(i int) {
		defer leftoversDone.Done()
		var own sync.Mutex
		for !stop.Load() {
			select {
			case reply := <-pokes[i]:
				sched.Hook.M(&own).Lock()
				sched.Hook.M(&own).Unlock()
				sched.Close(make(chan int))
				close(reply)
			default:
			}
			sched.P(&spins[i]).Add(1)
			sched.Hook.Gosched()
		}
	}
	aDone := make(chan sched.Report, 1)
	go func() {
		aDone <- sched.Run(sched.Options{Seed: 1, Stall: 20 * time.Millisecond}, func() {
			sched.Hook.Go(func() {
				for spins[0].Load() < 100 {
					sched.P(&spins[0]).Add(1)
					sched.Hook.Gosched()
				}
				sched.Hook.Go(func() { churn(1) })
				churn(0)
			})
			<-stuck
		})
	}()
	defer func() {
		stop.Store(true)
		leftoversDone.Wait()
	}()

	guarded(t, func() {
		for spins[0].Load() < 1000 || spins[1].Load() < 1000 {
			time.Sleep(time.Millisecond) // until A fell back and its goroutines run freely
		}
		poke = func() {
			for _, p := range pokes {
				reply := make(chan struct{})
				p <- reply
				<-reply
			}
		}
		for seed := range uint64(10) {
			for range 3 {
				rep := runB(seed)
				if rep.Free || rep.Diverged || !slices.Equal(rep.Options.Schedule, baseline[seed].Options.Schedule) {
					t.Errorf("seed %d: with leftovers running, %v; before them, %v", seed, rep, baseline[seed])
					return
				}
			}
		}
	})
	close(stuck)
	if rep := <-aDone; !rep.Free || !strings.Contains(rep.Reason, "made progress") {
		t.Errorf("run A: %v, want a fallback", rep)
	}
}

// Outside a controlled run, Gosched and Spin are runtime.Gosched, and the
// TryLocks are the mutexes'.
func TestSpinHooksOutsideARun(t *testing.T) {
	sched.Hook.Gosched()
	called := false
	sched.Hook.Spin(func() { called = true })()
	if !called {
		t.Error("Spin did not return its function")
	}
	var mu sync.Mutex
	if !sched.Hook.M(&mu).TryLock() || sched.Hook.M(&mu).TryLock() {
		t.Error("TryLock of a free mutex failed, or of a held one succeeded")
	}
	var rw sync.RWMutex
	if !sched.Hook.RW(&rw).TryRLock() || sched.Hook.RW(&rw).TryLock() {
		t.Error("TryRLock of a free RWMutex failed, or TryLock under a read lock succeeded")
	}
}

package spinlock

import (
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/sched"
)

var strategies = []sched.Strategy{sched.PCT(1), sched.PCT(2), sched.PCT(3), sched.Walk()}

// Three goroutines count under the spin lock, under control: every run
// ends, without a fallback, with every increment.
func TestCounterUnderControl(t *testing.T) {
	if !sched.Instrumented() {
		t.Fatal("sched.Instrumented() = false: the overlay was not used")
	}
	for _, st := range strategies {
		for seed := range uint64(30) {
			c := new(Counter)
			f := func() {
				for range 5 {
					c.Inc()
				}
			}
			rep := sched.Run(sched.Options{Seed: seed, Strategy: st, Length: 100, MaxSteps: 100_000, Stall: 500 * time.Millisecond}, f, f, f)
			if rep.Free || c.N() != 15 {
				t.Fatalf("%v seed %d: %d of 15; %v", st, seed, c.N(), rep)
			}
		}
	}
}

// A goroutine waiting for the flag, whose only yield point is its
// Gosched, lets the one that sets it run.
func TestFlagUnderControl(t *testing.T) {
	for _, st := range strategies {
		for seed := range uint64(30) {
			var f Flag
			var c Counter
			rep := sched.Run(sched.Options{Seed: seed, Strategy: st, Length: 40, Stall: 500 * time.Millisecond},
				f.Wait,
				func() {
					for range 3 {
						c.Inc()
					}
					f.Set()
				})
			if rep.Free {
				t.Fatalf("%v seed %d: %v", st, seed, rep)
			}
		}
	}
}

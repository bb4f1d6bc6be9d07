package sched_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrybudget/retrybudget/internal/sched"
)

// Inside a testing/synctest bubble, goroutines under control that wait on
// timers, sleep or wait for a context see the bubble's clock move straight
// to each instant, as they would without control: the scheduler waits on
// their channels instead of polling.
func TestRunKeepsTheBubblesClockExact(t *testing.T) {
	for seed := range uint64(10) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 70*time.Millisecond)
			defer cancel()
			var woke [3]time.Duration
			rep := sched.Run(sched.Options{Seed: seed, Strategy: sched.Walk()},
				func() {
					sched.Hook.Sleep(10 * time.Millisecond)
					woke[0] = time.Since(start)
				},
				func() {
					sched.Recv(time.After(25 * time.Millisecond))
					woke[1] = time.Since(start)
				},
				func() {
					sched.Recv(ctx.Done())
					woke[2] = time.Since(start)
				},
			)
			if rep.Free {
				t.Fatalf("seed %d: %v", seed, rep)
			}
			if want := [3]time.Duration{10 * time.Millisecond, 25 * time.Millisecond, 70 * time.Millisecond}; woke != want {
				t.Fatalf("seed %d: woke at %v, want %v", seed, woke, want)
			}
		})
	}
}

// A select with a default case, when no other goroutine can run, takes the
// default at once: the clock does not move.
func TestSelectWithDefaultAloneGoesOnAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		never := make(chan int)
		polls := 0
		var polled time.Duration
		rep := sched.Run(sched.Options{Seed: 1},
			func() {
				for range 100 {
					if sched.Hook.Select(true, sched.R(never)) == -1 {
						polls++
					}
				}
				polled = time.Since(start)
			},
			func() { sched.Hook.Sleep(time.Second) },
		)
		if rep.Free || polls != 100 {
			t.Fatalf("%d polls, %v", polls, rep)
		}
		if polled != 0 {
			t.Fatalf("100 polls took %v of the bubble's clock, want none", polled)
		}
	})
}

package sched_test

import (
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/sched"
)

// monitor is a one-slot monitor written as instrumented code would be: a
// busy flag guarded by mu, and a sync.Cond signalled when it clears.
type monitor struct {
	mu    sync.Mutex
	free  *sync.Cond
	busy  bool
	inUse int // how many goroutines are between enter and leave
	most  int
}

func newMonitor() *monitor {
	m := &monitor{}
	m.free = sync.NewCond(&m.mu)
	return m
}

func (m *monitor) enter() {
	sched.Hook.M(&m.mu).Lock()
	for sched.P(m.busy) {
		sched.Hook.C(m.free).Wait()
	}
	m.busy = sched.W(true)
	sched.Hook.M(&m.mu).Unlock()
	m.inUse++
	m.most = max(m.most, m.inUse)
	sched.Hook.Point()
	m.inUse--
}

func (m *monitor) leave(all bool) {
	sched.Hook.M(&m.mu).Lock()
	m.busy = sched.W(false)
	sched.Hook.M(&m.mu).Unlock()
	if all {
		sched.Hook.C(m.free).Broadcast()
	} else {
		sched.Hook.C(m.free).Signal()
	}
}

// Goroutines under control that wait on a sync.Cond pass the baton while
// they wait, and a Signal or a Broadcast wakes them: every schedule ends,
// under control, with the monitor held by one goroutine at a time. A
// sync.Cond left to the runtime would block a goroutine holding the baton,
// and the run would only end at its watchdog.
func TestCondUnderControl(t *testing.T) {
	for _, all := range []bool{false, true} {
		for _, st := range []sched.Strategy{sched.Walk(), sched.PCT(2)} {
			for seed := range uint64(30) {
				m := newMonitor()
				use := func() {
					for range 2 {
						m.enter()
						m.leave(all)
					}
				}
				start := time.Now()
				rep := sched.Run(sched.Options{Seed: seed, Strategy: st}, use, use, use)
				if rep.Free {
					t.Fatalf("%v seed %d (Broadcast %v): fell back to free running after %v: %v", st, seed, all, time.Since(start), rep)
				}
				if m.most != 1 || m.busy {
					t.Fatalf("%v seed %d: %d in the monitor at once, busy %v at the end", st, seed, m.most, m.busy)
				}
			}
		}
	}
}

// Outside a run, and for a goroutine outside control, the hooks are
// sync.Cond's own methods.
func TestCondOutsideARun(t *testing.T) {
	m := newMonitor()
	m.enter()
	done := make(chan struct{})
	go func() {
		m.enter()
		m.leave(false)
		close(done)
	}()
	time.Sleep(10 * time.Millisecond)
	m.leave(false)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter outside a run was not woken")
	}
}

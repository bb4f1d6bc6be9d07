package sched

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// Cond is the rewrite of a sync.Cond's Wait, Signal and Broadcast:
// c.Wait() becomes yield.Hook.C(&c).Wait(), and p.Signal()
// yield.Hook.C(p).Signal() for p a *sync.Cond.
//
// A goroutine under control that waits on a sync.Cond itself would block
// inside the runtime holding the baton, and the run would stop until its
// watchdog gave up. So under control Wait is a blocking operation of the
// run: it unlocks c.L (through Hook.M or Hook.RW when c.L is one of
// sync's mutexes, so that the run sees the release), then passes the
// baton until a Signal or Broadcast wakes it, then locks c.L again. A
// Signal wakes the longest waiting of those waiters, as sync.Cond does;
// with none it signals c itself, for a goroutine outside control waiting
// on it, and so does Broadcast. A waiter left waiting when the run falls
// back to free running keeps waiting, for real, until it is woken so.
type Cond struct{ c *sync.Cond }

// C returns c's hooks.
func (hooks) C(c *sync.Cond) Cond { return Cond{c} }

// A condWaiter is a goroutine under control waiting in a Cond's Wait.
type condWaiter struct {
	woken atomic.Bool
	ch    chan struct{} // closed when woken
}

// condWaiters holds, for each sync.Cond, its waiters under control in the
// order they began to wait. It is not a run's: a goroutine left waiting
// by a run that has ended is woken by a Signal made after it.
var condWaiters struct {
	mu sync.Mutex
	of map[*sync.Cond][]*condWaiter
}

// wake wakes the first of c's waiters under control, or all of them, and
// reports whether there was one.
func wakeWaiters(c *sync.Cond, all bool) bool {
	condWaiters.mu.Lock()
	defer condWaiters.mu.Unlock()
	ws := condWaiters.of[c]
	if len(ws) == 0 {
		return false
	}
	n := 1
	if all {
		n = len(ws)
	}
	for _, w := range ws[:n] {
		w.woken.Store(true)
		close(w.ch)
	}
	if rest := ws[n:]; len(rest) > 0 {
		condWaiters.of[c] = rest
	} else {
		delete(condWaiters.of, c)
	}
	return true
}

// Wait unlocks c.L, waits for a Signal or a Broadcast, and locks c.L
// again before it returns, as sync.Cond's Wait does.
func (h Cond) Wait() {
	r := active.Load()
	if r == nil || r.free.Load() {
		h.c.Wait()
		return
	}
	g := r.self()
	if g == nil {
		h.c.Wait()
		return
	}
	w := &condWaiter{ch: make(chan struct{})}
	condWaiters.mu.Lock()
	if condWaiters.of == nil {
		condWaiters.of = map[*sync.Cond][]*condWaiter{}
	}
	condWaiters.of[h.c] = append(condWaiters.of[h.c], w)
	condWaiters.mu.Unlock()
	unlockLocker(h.c.L)
	r.acquireObj(g, uintptr(unsafe.Pointer(h.c)), false, w.woken.Load, func() { <-w.ch })
	lockLocker(h.c.L)
}

// Signal wakes one goroutine waiting on c, if there is one.
func (h Cond) Signal() { h.notify(false) }

// Broadcast wakes every goroutine waiting on c.
func (h Cond) Broadcast() { h.notify(true) }

func (h Cond) notify(all bool) {
	if !wakeWaiters(h.c, all) {
		if all {
			h.c.Broadcast()
		} else {
			h.c.Signal()
		}
	}
	if r := active.Load(); r != nil {
		// The waiters woken try again; the step that ends here touched c.
		r.releasedObj(uintptr(unsafe.Pointer(h.c)))
	}
}

// unlockLocker unlocks l through the hooks of sync's mutexes when it is
// one of them.
func unlockLocker(l sync.Locker) {
	switch m := l.(type) {
	case *sync.Mutex:
		Hook.M(m).Unlock()
	case *sync.RWMutex:
		Hook.RW(m).Unlock()
	default:
		l.Unlock()
	}
}

// lockLocker locks l through the hooks of sync's mutexes when it is one of
// them.
func lockLocker(l sync.Locker) {
	switch m := l.(type) {
	case *sync.Mutex:
		Hook.M(m).Lock()
	case *sync.RWMutex:
		Hook.RW(m).Lock()
	default:
		l.Lock()
	}
}

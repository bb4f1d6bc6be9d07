// Package spinlock is a counter under a spin lock that waits with
// runtime.Gosched, and a flag whose waiters spin on a read the rewrite
// leaves as it is: under control only the rewrite of runtime.Gosched lets
// them hand the baton on.
package spinlock

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Counter counts under a spin lock.
type Counter struct {
	held atomic.Bool
	n    atomic.Int64
}

func (c *Counter) lock() {
	for !c.held.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
}

func (c *Counter) unlock() { c.held.Store(false) }

// Inc adds one, by a load and a store under the lock.
func (c *Counter) Inc() {
	c.lock()
	v := c.n.Load()
	c.n.Store(v + 1)
	c.unlock()
}

// N returns the count.
func (c *Counter) N() int64 { return c.n.Load() }

// Flag is set once. A sync.Map's methods are not yield points.
type Flag struct{ m sync.Map }

// Set sets the flag.
func (f *Flag) Set() { f.m.Store("set", true) }

// Wait spins until the flag is set.
func (f *Flag) Wait() {
	for {
		if _, ok := f.m.Load("set"); ok {
			return
		}
		runtime.Gosched()
	}
}

package yield

import (
	"iter"
	"sync"
	"time"
)

// P is a yield point that returns x: the rewrite of a method call on an
// atomic value, or of an atomic function's first argument, so that the
// expression keeps its shape: b.n.Add(1) becomes yield.P(&b.n).Add(1).
// In a controlled run, an operation on an atomic variable that leaves its
// value as it was (a load, a failed CompareAndSwap) makes no progress, and
// neither does a P of anything else (a read of a field): see Spinning in
// the package documentation.
func P[T any](x T) T {
	if r := active.Load(); r != nil && !r.free.Load() {
		if g := r.self(); g != nil {
			r.yield(g)
			g.watch(x)
		}
	}
	return x
}

// Point is a yield point as a statement: the rewrite puts it before every
// select statement.
func Point() {
	if r := active.Load(); r != nil {
		r.point()
	}
}

// Mutex is the rewrite of a sync.Mutex's methods: m.Lock() becomes
// yield.M(&m).Lock(). In a controlled run, Lock on a held mutex passes the
// baton until the mutex is released.
type Mutex struct{ m *sync.Mutex }

// M returns m's hooks.
func M(m *sync.Mutex) Mutex { return Mutex{m} }

// Lock locks the mutex.
func (m Mutex) Lock() {
	if r := active.Load(); r != nil {
		r.acquire(m.m.TryLock, m.m.Lock)
		return
	}
	m.m.Lock()
}

// TryLock tries to lock the mutex, after a yield point. A failure makes
// no progress (see Spinning in the package documentation).
func (m Mutex) TryLock() bool { return try(m.m.TryLock) }

// Unlock unlocks the mutex, then yields.
func (m Mutex) Unlock() {
	m.m.Unlock()
	if r := active.Load(); r != nil {
		r.released()
	}
}

// RWMutex is the rewrite of a sync.RWMutex's methods: m.RLock() becomes
// yield.RW(&m).RLock().
type RWMutex struct{ m *sync.RWMutex }

// RW returns m's hooks.
func RW(m *sync.RWMutex) RWMutex { return RWMutex{m} }

// Lock locks the mutex for writing.
func (m RWMutex) Lock() {
	if r := active.Load(); r != nil {
		r.acquire(m.m.TryLock, m.m.Lock)
		return
	}
	m.m.Lock()
}

// RLock locks the mutex for reading.
func (m RWMutex) RLock() {
	if r := active.Load(); r != nil {
		r.acquire(m.m.TryRLock, m.m.RLock)
		return
	}
	m.m.RLock()
}

// TryLock tries to lock the mutex for writing, after a yield point. A
// failure makes no progress (see Spinning in the package documentation).
func (m RWMutex) TryLock() bool { return try(m.m.TryLock) }

// TryRLock tries to lock the mutex for reading, after a yield point. A
// failure makes no progress.
func (m RWMutex) TryRLock() bool { return try(m.m.TryRLock) }

// Unlock unlocks the mutex for writing, then yields.
func (m RWMutex) Unlock() {
	m.m.Unlock()
	if r := active.Load(); r != nil {
		r.released()
	}
}

// RUnlock undoes one RLock, then yields.
func (m RWMutex) RUnlock() {
	m.m.RUnlock()
	if r := active.Load(); r != nil {
		r.released()
	}
}

// RLocker returns the mutex's RLocker. Its calls are not yield points.
func (m RWMutex) RLocker() sync.Locker { return m.m.RLocker() }

// Send is the rewrite of the statement ch <- v. In a controlled run, a send
// that cannot complete passes the baton until another channel operation
// completes (see [Select]).
func Send[T any](ch chan<- T, v T) {
	if r := active.Load(); r != nil && !r.free.Load() {
		if g := r.self(); g != nil {
			r.choose1(g, false, []Case{S(ch, v)})
			return
		}
	}
	ch <- v
}

// Recv is the rewrite of the expression <-ch.
func Recv[T any](ch <-chan T) T {
	v, _ := Recv2(ch)
	return v
}

// Recv2 is the rewrite of v, ok := <-ch.
func Recv2[T any](ch <-chan T) (v T, ok bool) {
	if r := active.Load(); r != nil && !r.free.Load() {
		if g := r.self(); g != nil {
			c := R(ch)
			r.choose1(g, false, []Case{c})
			return c.V, c.OK
		}
	}
	v, ok = <-ch
	return v, ok
}

// Sleep is time.Sleep as a blocking operation of a controlled run: a
// goroutine under control that sleeps passes the baton, as one waiting on
// a timer's channel does, and the others run meanwhile. Outside a run it
// is time.Sleep.
func Sleep(d time.Duration) {
	if r := active.Load(); r != nil && !r.free.Load() {
		if g := r.self(); g != nil {
			if d <= 0 {
				r.yield(g)
				return
			}
			t := time.NewTimer(d)
			defer t.Stop()
			r.choose1(g, false, []Case{R(t.C)})
			return
		}
	}
	time.Sleep(d)
}

// Range is the rewrite of a range over a channel: for v := range ch
// becomes for v := range yield.Range(ch). Each receive is a [Recv2].
func Range[T any](ch <-chan T) iter.Seq[T] {
	return func(yield func(T) bool) {
		for {
			v, ok := Recv2(ch)
			if !ok || !yield(v) {
				return
			}
		}
	}
}

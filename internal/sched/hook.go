package sched

import (
	"iter"
	"reflect"
	"sync"
	"time"
	"unsafe"
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
			// x is made an interface value only where it is a pointer (to
			// an atomic variable), which costs nothing: a read of a field,
			// boxed, cost an allocation at every yield point.
			obj := uintptr(localObject)
			if isPointer(x) {
				obj = objectOf(x)
			}
			if obj == localObject && r.inSection(g) {
				return x // a field read inside a critical section
			}
			if r.opt.Choices {
				g.pending = obj
			}
			r.yield(g)
			if obj == localObject {
				g.mark = markQuiet // a read (see gor.watch)
			} else {
				g.watch(x)
			}
		}
	}
	return x
}

// W is a yield point before a store into a field, which returns x, the
// value stored: the rewrite of an assignment into a field, so that the
// store is a step of its own, b.tokens -= c becomes
// yield.Hook.Point(); b.tokens = yield.W(b.tokens - c). Unlike a read's P, the
// step W begins writes memory that other goroutines may read: while the
// goroutine holds a mutex it is taken to touch only what the mutex guards,
// and otherwise to touch anything, as a Hook.Point's step is (see Choice.Obj),
// so that an exhaustive search tries the other goroutines' steps both
// before and after the store. The store is progress (see Spinning).
func W[T any](x T) T {
	if r := active.Load(); r != nil && !r.free.Load() {
		g := r.self()
		if g != nil && r.inSection(g) {
			return x // a field write inside a critical section
		}
		if g != nil && g.tag != 0 && g.locks == 0 {
			unguarded.Store(true) // see Options.Fine
		}
		if r.opt.Choices {
			if g != nil {
				obj := r.local(g)
				g.store = obj == 0 && g.tag != 0
				r.point(obj)
				return x
			}
		}
		r.point(0)
	}
	return x
}

// isPointer reports whether x is a pointer, without letting x escape:
// the only values objectOf and gor.watch take for an atomic variable.
func isPointer(x any) bool {
	t := reflect.TypeOf(x)
	return t != nil && t.Kind() == reflect.Pointer
}

// localObject is the Choice.Obj of a step that touches only memory the
// goroutine owns or holds a lock on: a read of a field, a computation.
const localObject = 1

// objectOf returns the address of the atomic variable x points to, or
// localObject for anything else: a field's value, read. A read commutes
// with another goroutine's step unless that step writes what it reads,
// and a write of a field outside a critical section is a step that
// commutes with none (see Hook.Point), so a read racing it is still ordered
// both ways.
func objectOf(x any) uintptr {
	if _, ok := load(x); !ok {
		return localObject
	}
	return reflect.ValueOf(x).Pointer()
}

// local is the object of a step of g that reads or writes plain memory:
// localObject while g holds a mutex, which, the code being free of data
// races, guards that memory; else zero, not known, since the memory may be
// shared without synchronization (a flag published outside a lock, a lazy
// pointer), and the search must try a switch there.
func (r *run) local(g *gor) uintptr {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.localOf(g)
}

// localOf is local, called with r.mu held.
func (r *run) localOf(g *gor) uintptr {
	for _, h := range r.holders {
		if h == g {
			return localObject
		}
	}
	return 0
}

// acquireLock is Lock, RLock's acquire, for the lock at obj, exclusive
// for a Lock.
func acquireLock(obj unsafe.Pointer, exclusive bool, try func() bool, block func()) {
	r := active.Load()
	if r == nil {
		block()
		return
	}
	g := (*gor)(nil)
	if !r.free.Load() {
		g = r.self()
	}
	if g == nil {
		block()
		return
	}
	r.acquireObj(g, uintptr(obj), exclusive, try, block)
}

// Point is a yield point as a statement: the rewrite puts it before every
// select statement, call and field write. While the goroutine holds a
// mutex, the step it begins is taken to touch only memory that mutex
// guards (see Choice.Obj); code that is not rewritten and shares memory
// past it, such as a recorder stamping operations, calls Hook.PointAt or
// Hook.Boundary instead.
func (hooks) Point() {
	if r := active.Load(); r != nil && !r.free.Load() {
		if g := r.self(); g != nil && r.inSection(g) {
			return // a field write or a call inside a critical section
		}
		if r.opt.Choices {
			if g := r.self(); g != nil {
				r.point(r.local(g))
				return
			}
		}
		r.point(0)
	}
}

// Tag sets what the calling goroutine, under a traced controlled run
// (Options.Trace), is doing: each Step taken by it until its next Tag
// carries v. A recorder tags its goroutines' steps with the operation
// they are inside, zero outside one; under Options.Choices, a store
// outside any critical section while the tag is not zero is marked
// (Choice.Unguarded). Elsewhere Tag does nothing.
func (hooks) Tag(v int64) {
	if r := active.Load(); r != nil && !r.free.Load() {
		if g := r.self(); g != nil {
			g.tag, g.between = v, false
		}
	}
}

// Between says that the calling goroutine, in a controlled run, stands
// between two of a harness's operations until its next Tag: a switch away
// from it there is marked (Choice.Between), so that a search may bound
// the preemptions inside operations only, and let a goroutine run a whole
// operation of its own at no cost to the bound. Elsewhere Between does
// nothing.
func (hooks) Between() {
	if r := active.Load(); r != nil && !r.free.Load() {
		if g := r.self(); g != nil {
			g.between = true
		}
	}
}

// Boundary is a yield point whose step may touch anything: an exhaustive
// search never takes it to commute with another (see Choice.Obj).
func (hooks) Boundary() {
	if r := active.Load(); r != nil {
		r.point(0)
	}
}

// PointAt is a yield point whose step touches the variable x points to,
// besides memory the goroutine owns: a recorder that stamps operations
// from one counter passes the counter, so that an exhaustive search takes
// its steps to commute with the budget's, and not with each other. x must
// be a non-nil pointer.
func (hooks) PointAt(x any) {
	if r := active.Load(); r != nil {
		r.point(reflect.ValueOf(x).Pointer())
	}
}

// Mutex is the rewrite of a sync.Mutex's methods: m.Lock() becomes
// yield.Hook.M(&m).Lock(). In a controlled run, Lock on a held mutex passes the
// baton until the mutex is released.
type Mutex struct{ m *sync.Mutex }

// M returns m's hooks.
func (hooks) M(m *sync.Mutex) Mutex { return Mutex{m} }

// Lock locks the mutex.
func (m Mutex) Lock() {
	if active.Load() != nil {
		acquireLock(unsafe.Pointer(m.m), true, m.m.TryLock, m.m.Lock)
		return
	}
	m.m.Lock()
}

// TryLock tries to lock the mutex, after a yield point. A failure makes
// no progress (see Spinning in the package documentation).
func (m Mutex) TryLock() bool { return try(m.m.TryLock) }

// Unlock unlocks the mutex, then yields.
func (m Mutex) Unlock() {
	if r := active.Load(); r != nil {
		r.unlocked(uintptr(unsafe.Pointer(m.m)))
	}
	m.m.Unlock()
	if r := active.Load(); r != nil {
		r.releasedObj(uintptr(unsafe.Pointer(m.m)))
	}
}

// RWMutex is the rewrite of a sync.RWMutex's methods: m.RLock() becomes
// yield.Hook.RW(&m).RLock().
type RWMutex struct{ m *sync.RWMutex }

// RW returns m's hooks.
func (hooks) RW(m *sync.RWMutex) RWMutex { return RWMutex{m} }

// Lock locks the mutex for writing.
func (m RWMutex) Lock() {
	if active.Load() != nil {
		acquireLock(unsafe.Pointer(m.m), true, m.m.TryLock, m.m.Lock)
		return
	}
	m.m.Lock()
}

// RLock locks the mutex for reading.
func (m RWMutex) RLock() {
	if active.Load() != nil {
		acquireLock(unsafe.Pointer(m.m), false, m.m.TryRLock, m.m.RLock)
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
	if r := active.Load(); r != nil {
		r.unlocked(uintptr(unsafe.Pointer(m.m)))
	}
	m.m.Unlock()
	if r := active.Load(); r != nil {
		r.releasedObj(uintptr(unsafe.Pointer(m.m)))
	}
}

// RUnlock undoes one RLock, then yields.
func (m RWMutex) RUnlock() {
	m.m.RUnlock()
	if r := active.Load(); r != nil {
		r.releasedObj(uintptr(unsafe.Pointer(m.m)))
	}
}

// RLocker returns the mutex's RLocker. Its calls are not yield points.
func (m RWMutex) RLocker() sync.Locker { return m.m.RLocker() }

// Send is the rewrite of the statement ch <- v. In a controlled run, a send
// that cannot complete passes the baton until another channel operation
// completes (see Hook.Select).
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
func (hooks) Sleep(d time.Duration) {
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

// Sleeper returns Hook.Sleep: the rewrite of a call of time.Sleep,
// time.Sleep(d), is yield.Hook.Sleeper(time.Sleep)(d), so that the file still
// uses its import of package time. f is not called.
func (hooks) Sleeper(f func(time.Duration)) func(time.Duration) { return Hook.Sleep }

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

// hooks is the type of Hook.
type hooks struct{}

// Hook holds the hooks that the rewrite of cmd/budgetcheck calls in place
// of the operations they stand for, and the few a harness calls to take
// part in a run: see "Two audiences" in the package doc. No hand-written
// code needs them, and they change with the rewrite.
var Hook hooks

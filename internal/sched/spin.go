package sched

import (
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// A goroutine under control that spins (waits in a loop for another to
// change something, with runtime.Gosched, a failed CompareAndSwap, a failed
// TryLock or a load) makes no progress, and a strategy that kept choosing
// it (PCT, when it has the highest priority) would never let the goroutine
// it waits for run. So each step is settled, when the goroutine that took
// it reaches its next yield point, as progress or not:
//
//   - a step whose operation was an atomic one (its yield point a P of a
//     pointer to an atomic variable) made progress if it changed the
//     variable's value: a failed CompareAndSwap, a load, or a store of the
//     value already there did not;
//   - a failed TryLock or TryRLock, a blocking operation that could not
//     complete, a select that took its default case, a read of a field
//     (a P of anything else) and the step of a Spin made none;
//   - every other step made progress, and so does a goroutine's return
//     and a channel operation the scheduler completes for a blocked one.
//
// The run counts the steps that made progress in its epoch. A goroutine is
// spinning when spinLimit of its steps in a row made no progress while
// the epoch stayed the same, or when it called Spin and the epoch has not
// moved since; a spinning goroutine is passed over while another can
// run (see pickLocked). Settling depends only on what the goroutines did,
// so a schedule replays as it did.

// spinLimit is the number of steps in a row without progress, by a
// goroutine and while no other made any, after which it is spinning.
const spinLimit = 16

// A mark says what a goroutine's step did, as far as is known, until the
// step is settled.
type mark uint8

const (
	markNone     mark = iota // settled, or nothing to settle
	markProgress             // made progress, or may have
	markQuiet                // made none
	markWatch                // an atomic operation on gor.cell: progress if it changed its value
)

// settle settles g's step, which ends now. Called with r.mu held, by g.
func (r *run) settle(g *gor) {
	if g.epoch != r.epoch {
		g.epoch, g.quiet = r.epoch, 0
	}
	m := g.mark
	g.mark = markNone
	progress := m == markProgress
	switch m {
	case markNone:
		return
	case markWatch:
		now, _ := load(g.cell)
		progress = now != g.before
		g.cell = nil
	}
	if progress {
		r.epoch++
		g.epoch, g.quiet = r.epoch, 0
		return
	}
	g.quiet++
}

// spinning reports whether g is spinning. Called with r.mu held.
func (r *run) spinning(g *gor) bool {
	return g.epoch == r.epoch && g.quiet >= r.spinLimit
}

// watch marks the step g takes next as an operation on the atomic
// variable x points to, or as a read when x is no such pointer.
func (g *gor) watch(x any) {
	if v, ok := load(x); ok {
		g.mark, g.cell, g.before = markWatch, x, v
		return
	}
	g.mark = markQuiet
}

// A cellValue is the value of an atomic variable: a number, a pointer, or
// the two words of an atomic.Value.
type cellValue struct {
	n    uint64
	p, q unsafe.Pointer
}

// load returns, read atomically, the value of the atomic variable x points
// to: one of sync/atomic's types, or a variable that its functions take.
// It reports false for anything else, and for a nil pointer.
func load(x any) (cellValue, bool) {
	switch p := x.(type) {
	case *atomic.Int32:
		if p != nil {
			return cellValue{n: uint64(p.Load())}, true
		}
	case *atomic.Int64:
		if p != nil {
			return cellValue{n: uint64(p.Load())}, true
		}
	case *atomic.Uint32:
		if p != nil {
			return cellValue{n: uint64(p.Load())}, true
		}
	case *atomic.Uint64:
		if p != nil {
			return cellValue{n: p.Load()}, true
		}
	case *atomic.Uintptr:
		if p != nil {
			return cellValue{n: uint64(p.Load())}, true
		}
	case *atomic.Bool:
		if p != nil && p.Load() {
			return cellValue{n: 1}, true
		} else if p != nil {
			return cellValue{}, true
		}
	case *atomic.Value:
		if p != nil {
			// The words of its interface, as Value.Load reads them.
			w := (*[2]unsafe.Pointer)(unsafe.Pointer(p))
			return cellValue{p: atomic.LoadPointer(&w[0]), q: atomic.LoadPointer(&w[1])}, true
		}
	case *int32:
		if p != nil {
			return cellValue{n: uint64(atomic.LoadInt32(p))}, true
		}
	case *int64:
		if p != nil {
			return cellValue{n: uint64(atomic.LoadInt64(p))}, true
		}
	case *uint32:
		if p != nil {
			return cellValue{n: uint64(atomic.LoadUint32(p))}, true
		}
	case *uint64:
		if p != nil {
			return cellValue{n: atomic.LoadUint64(p)}, true
		}
	case *uintptr:
		if p != nil {
			return cellValue{n: uint64(atomic.LoadUintptr(p))}, true
		}
	case *unsafe.Pointer:
		if p != nil {
			return cellValue{p: atomic.LoadPointer(p)}, true
		}
	default:
		return loadPointer(x)
	}
	return cellValue{}, false
}

// loadPointer is load for an *atomic.Pointer[T], whatever T: its only
// field of size is v, an unsafe.Pointer.
func loadPointer(x any) (cellValue, bool) {
	t := reflect.TypeOf(x)
	if t == nil || t.Kind() != reflect.Pointer {
		return cellValue{}, false
	}
	e := t.Elem()
	if e.Kind() != reflect.Struct || e.PkgPath() != "sync/atomic" {
		return cellValue{}, false
	}
	f, ok := e.FieldByName("v")
	if !ok || f.Type.Kind() != reflect.UnsafePointer {
		return cellValue{}, false
	}
	p := reflect.ValueOf(x).UnsafePointer()
	if p == nil {
		return cellValue{}, false
	}
	return cellValue{p: atomic.LoadPointer((*unsafe.Pointer)(unsafe.Add(p, f.Offset)))}, true
}

// Gosched is runtime.Gosched as a yield point, for code that calls the
// hooks itself: Spin(runtime.Gosched)().
func (hooks) Gosched() { Hook.Spin(runtime.Gosched)() }

// Spin is the rewrite of a call of runtime.Gosched, which keeps the call:
// runtime.Gosched() becomes yield.Hook.Spin(runtime.Gosched)(). It returns f.
// In a controlled run, the goroutine that calls it says it is waiting for
// another to do something: it passes the baton to another goroutine that
// can run, and is passed over until one of the others makes progress
// (see [Run]); when no other can run, it goes on.
func (hooks) Spin(f func()) func() {
	if r := active.Load(); r != nil && !r.free.Load() {
		if g := r.self(); g != nil {
			r.spin(g)
		}
	}
	return f
}

// spin is Spin for g, under control.
func (r *run) spin(g *gor) {
	r.ticks.Add(1)
	r.mu.Lock()
	r.blockedAt = time.Time{}
	if !r.free.Load() {
		r.settle(g)
		g.quiet = max(g.quiet, r.spinLimit)
	}
	r.handOff(g)
	g.mark = markQuiet // the loop that called Spin, up to its next yield point
}

// try is a TryLock: a yield point, then f; a failure makes no progress.
func try(f func() bool) bool {
	r := active.Load()
	if r == nil || r.free.Load() {
		return f()
	}
	g := r.self()
	if g == nil {
		return f()
	}
	r.yield(g)
	ok := f()
	if !ok {
		g.mark = markQuiet
	}
	return ok
}

// leftovers are the goroutines that controlled runs left behind, running
// freely, by their curG: those that had not returned when their run's
// control ended, and the goroutines they start with Go. A later run takes
// none of them for its own, and their hooks do not touch its state.
var leftovers leftoverSet

type leftoverSet struct {
	n  atomic.Int32 // how many, so that has costs a load when there are none
	gs sync.Map     // curG -> struct{}
}

func (s *leftoverSet) add(g uintptr) {
	if _, loaded := s.gs.LoadOrStore(g, struct{}{}); !loaded {
		s.n.Add(1)
	}
}

func (s *leftoverSet) remove(g uintptr) {
	if _, loaded := s.gs.LoadAndDelete(g); loaded {
		s.n.Add(-1)
	}
}

// has reports whether the calling goroutine is a leftover.
func (s *leftoverSet) has() bool {
	if s.n.Load() == 0 {
		return false
	}
	_, ok := s.gs.Load(curG())
	return ok
}

// goLeftover starts fn as a goroutine that is a leftover too.
func goLeftover(fn func()) {
	go func() {
		g := curG()
		leftovers.add(g)
		defer leftovers.remove(g)
		fn()
	}()
}

package sched

import (
	"reflect"
	"slices"
	"sync"
	"time"
	"unsafe"
)

// Go is the rewrite of a go statement. go f(x, y) becomes
//
//	{ ryield_f, ryield_x, ryield_y := f, x, y; ryield.Hook.Go(func() { ryield_f(ryield_x, ryield_y) }) }
//
// so the function value and its arguments are still evaluated by the
// goroutine that runs the statement. Called by a goroutine under control,
// Go starts fn as a goroutine under control of the same run, and yields:
// the new goroutine may run first. Otherwise, and when the run already
// has 64 goroutines, it is go fn().
//
// A goroutine started this way is scheduled until every function given
// to [Run] has returned; it then runs freely, since it may never return
// (a refill loop of a budget nobody closes), and never joins a later run.
// Nor does a goroutine that such a goroutine starts with Go.
func (hooks) Go(fn func()) {
	if r := active.Load(); r != nil && !r.free.Load() {
		if g := r.self(); g != nil && r.spawn(fn) {
			r.yield(g)
			return
		}
	}
	if leftovers.has() {
		goLeftover(fn)
		return
	}
	go fn()
}

// spawn starts fn as a new goroutine under control, waiting for the
// baton, and reports whether it did.
func (r *run) spawn(fn func()) bool {
	r.mu.Lock()
	if len(r.gs) >= maxGoroutines || r.free.Load() {
		r.mu.Unlock()
		return false
	}
	g := &gor{id: len(r.gs), baton: make(chan struct{}, 1), prio: r.childPriority(), child: true, pending: localObject}
	r.gs = append(r.gs, g)
	r.mu.Unlock()
	started := make(chan struct{})
	go r.child(g, started, fn)
	<-started
	return true
}

// childPriority draws a PCT priority for a goroutine started during the
// run, at a uniformly random rank among the priorities of the run's
// functions.
func (r *run) childPriority() int {
	return r.opt.Strategy.depth() + r.rng.IntN(r.initial*prioritySpread+1)
}

// prioritySpread separates the priorities of Run's functions, so that a
// goroutine started later can be given a rank between any two of them.
const prioritySpread = 1024

//go:noinline
func (r *run) child(g *gor, started chan struct{}, fn func()) {
	r.identify(g)
	close(started)
	r.await(g)
	g.mark = markProgress
	defer r.exit(g)
	fn()
}

// Close is the rewrite of close(ch): it closes ch, then, in a controlled
// run, wakes the goroutines blocked on a channel and yields.
func Close[T any](ch chan<- T) {
	close(ch)
	if r := active.Load(); r != nil {
		r.releasedObj(reflect.ValueOf(ch).Pointer())
	}
}

// AwaitClose receives from ch, which only Close closes and nothing sends
// on: a gate that goroutines under control wait at until another opens
// it. Until then a search need not choose them (Choice.Waiting): each
// would only find the gate shut. Woken by any other goroutine's unlock or
// channel operation, as every blocked goroutine is, they would otherwise
// be a choice at each such step, and a search would try them there,
// schedules that differ in nothing.
func AwaitClose[T any](ch chan T) {
	r := active.Load()
	if r == nil || r.free.Load() {
		<-ch
		return
	}
	g := r.self()
	if g == nil {
		<-ch
		return
	}
	select {
	case <-ch: // open already: no gate to wait at, and the same steps
	default:
		obj := reflect.ValueOf(ch).Pointer()
		r.mu.Lock()
		g.gate = obj
		r.mu.Unlock()
	}
	Recv(ch)
	r.mu.Lock()
	g.gate = 0 // Close clears it too; a run that fell back to free running may not
	r.mu.Unlock()
}

// Alone runs f on the calling goroutine, a goroutine under control in a
// run with Options.Alone: while no other goroutine could be chosen (each
// has returned, is blocked or waits at a gate, see AwaitClose), f's yield points are
// no steps, and the run records nothing for them. Once another could (f
// started one), they are steps again. Elsewhere Alone is f().
func (hooks) Alone(f func()) {
	r := active.Load()
	if r == nil || !r.opt.Alone || r.free.Load() {
		f()
		return
	}
	g := r.self()
	if g == nil {
		f()
		return
	}
	r.mu.Lock()
	prev := r.alone
	r.alone = g
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.alone = prev
		r.mu.Unlock()
	}()
	f()
}

// Settle, in a run with Options.Alone, lets every other goroutine under
// control that can run, and does not wait at a gate, run until it blocks
// or returns, before the calling goroutine goes on; the switches it makes
// are no preemptions. A harness calls it once a budget is built, and once
// the operations that bring it to an edge are made: the budget's own
// goroutines (a refill loop, an actor) then wait where they idle before
// the concurrent part begins, and a search finds them blocked, not about
// to take their first steps at every point. Elsewhere Settle does nothing.
func (hooks) Settle() {
	r := active.Load()
	if r == nil || !r.opt.Alone || r.free.Load() {
		return
	}
	g := r.self()
	if g == nil {
		return
	}
	for range settleRounds {
		r.mu.Lock()
		others := slices.ContainsFunc(r.gs, func(o *gor) bool {
			return o != g && o.st == runnable && o.gate == 0 && !r.spinning(o)
		})
		g.settling = others
		r.mu.Unlock()
		if !others || r.free.Load() {
			return
		}
		r.yield(g)
	}
	r.mu.Lock()
	g.settling = false
	r.mu.Unlock()
}

// settleRounds bounds the times Settle gives way: a goroutine of the
// budget that never blocks (a polling loop) is left running with the
// caller after it.
const settleRounds = 64

// Once is the rewrite of a sync.Once's Do: o.Do(f) becomes
// yield.Hook.O(&o).Do(f). In a controlled run, a Do while another goroutine
// under control is inside Do of the same Once passes the baton until that
// one returns, instead of blocking in the Once.
type Once struct{ o *sync.Once }

// O returns o's hooks.
func (hooks) O(o *sync.Once) Once { return Once{o} }

// Do calls o.Do(f), after a yield point.
func (h Once) Do(f func()) {
	r := active.Load()
	if r == nil || r.free.Load() {
		h.o.Do(f)
		return
	}
	g := r.self()
	if g == nil {
		h.o.Do(f)
		return
	}
	r.acquireAs(g, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, busy := r.onces[h.o]; busy {
			return false
		}
		r.onces[h.o] = g
		return true
	}, func() {})
	defer func() {
		r.mu.Lock()
		if r.onces[h.o] == g {
			delete(r.onces, h.o)
		}
		r.mu.Unlock()
		r.released()
	}()
	h.o.Do(f)
}

// A Case is one communication of a select statement, made by [R] or [S]
// for Hook.Select.
type Case interface {
	try() bool
	reflectCase() reflect.SelectCase
	received(v reflect.Value, ok bool)
	// channel is the channel, nil for a nil channel, and unbuffered
	// whether it has no buffer.
	channel() (p unsafe.Pointer, unbuffered bool)
	// send reports whether the case sends; value is what it sends.
	send() bool
	value() any
	// deliver completes a receive with a value a sender handed over.
	deliver(v any)
}

// RecvCase is a receive case; after Hook.Select chose it, V and OK hold what
// v, ok := <-ch would.
type RecvCase[T any] struct {
	ch <-chan T
	V  T
	OK bool
}

// R returns the case <-ch.
func R[T any](ch <-chan T) *RecvCase[T] { return &RecvCase[T]{ch: ch} }

func (c *RecvCase[T]) try() bool {
	select {
	case c.V, c.OK = <-c.ch:
		return true
	default:
		return false
	}
}

func (c *RecvCase[T]) reflectCase() reflect.SelectCase {
	return reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c.ch)}
}

func (c *RecvCase[T]) received(v reflect.Value, ok bool) {
	c.OK = ok
	if ok {
		c.V, _ = v.Interface().(T) // the comma form takes a nil interface
	}
}

func (c *RecvCase[T]) channel() (unsafe.Pointer, bool) {
	return *(*unsafe.Pointer)(unsafe.Pointer(&c.ch)), cap(c.ch) == 0
}

func (c *RecvCase[T]) send() bool    { return false }
func (c *RecvCase[T]) value() any    { return nil }
func (c *RecvCase[T]) deliver(v any) { c.V, _ = v.(T); c.OK = true }

// SendCase is a send case.
type SendCase[T any] struct {
	ch chan<- T
	v  T
}

// S returns the case ch <- v, v evaluated now as a select statement
// evaluates it.
func S[T any](ch chan<- T, v T) *SendCase[T] { return &SendCase[T]{ch: ch, v: v} }

func (c *SendCase[T]) try() bool {
	select {
	case c.ch <- c.v:
		return true
	default:
		return false
	}
}

func (c *SendCase[T]) reflectCase() reflect.SelectCase {
	return reflect.SelectCase{Dir: reflect.SelectSend, Chan: reflect.ValueOf(c.ch), Send: reflect.ValueOf(&c.v).Elem()}
}

func (c *SendCase[T]) received(reflect.Value, bool) {}

func (c *SendCase[T]) channel() (unsafe.Pointer, bool) {
	return *(*unsafe.Pointer)(unsafe.Pointer(&c.ch)), cap(c.ch) == 0
}

func (c *SendCase[T]) send() bool  { return true }
func (c *SendCase[T]) value() any  { return c.v }
func (c *SendCase[T]) deliver(any) {}

// Select is the rewrite of a select statement with a case for each of
// cases, and a default case if hasDefault: it returns the index of the
// case that proceeds, or −1 for the default. The statement
//
//	select { case v := <-a: A; case b <- x: B; default: D }
//
// becomes
//
//	switch ryield_0, ryield_1 := ryield.R(a), ryield.S(b, x); ryield.Hook.Select(true, ryield_0, ryield_1) {
//	case 0: v := ryield_0.V; A
//	case 1: B
//	default: D }
//
// which keeps what break, continue and labels mean.
//
// In a controlled run Select is a yield point, and then it tries the
// cases in an order drawn from the run's seed (a select statement chooses
// uniformly among the ready ones). When none is ready it passes the baton
// until another channel operation completes, and then tries again; with a
// default case it passes the baton once, so that a loop polling a channel
// lets the others run, and returns −1. A send and a receive on an
// unbuffered channel, both by goroutines under control, meet in the
// scheduler: the one that comes second completes both, in the order the
// first ones waited. Outside a controlled run Select is reflect.Select,
// which allocates.
func (hooks) Select(hasDefault bool, cases ...Case) int {
	if r := active.Load(); r != nil && !r.free.Load() {
		if g := r.self(); g != nil {
			return r.choose1(g, hasDefault, cases)
		}
	}
	return selectFree(hasDefault, cases)
}

func selectFree(hasDefault bool, cases []Case) int {
	sc := make([]reflect.SelectCase, len(cases), len(cases)+1)
	for i, c := range cases {
		sc[i] = c.reflectCase()
	}
	if hasDefault {
		sc = append(sc, reflect.SelectCase{Dir: reflect.SelectDefault})
	}
	i, v, ok := reflect.Select(sc)
	if i == len(cases) {
		return -1
	}
	cases[i].received(v, ok)
	return i
}

// A waiter is a goroutine under control blocked in a channel operation:
// another one may complete it on an unbuffered channel.
type waiter struct {
	g      *gor
	cases  []Case
	chosen int
	done   bool
}

// communicate tries cases in order, first against the waiters on
// unbuffered channels, then on the channels themselves; it returns the
// index of the case that proceeded, or −1. Called with r.mu held.
func (r *run) communicate(self *waiter, cases []Case, order []int) int {
	for _, i := range order {
		c := cases[i]
		if p, unbuffered := c.channel(); p != nil && unbuffered {
			for wi, w := range r.waiters {
				if w == self {
					continue
				}
				for j, wc := range w.cases {
					if q, _ := wc.channel(); q != p || wc.send() == c.send() {
						continue
					}
					if c.send() {
						wc.deliver(c.value())
					} else {
						c.deliver(wc.value())
					}
					w.chosen, w.done = j, true
					w.g.st = runnable
					r.waiters = slices.Delete(r.waiters, wi, wi+1)
					return i
				}
			}
		}
		if c.try() {
			return i
		}
	}
	return -1
}

// choose1 is Select for g, under control.
func (r *run) choose1(g *gor, hasDefault bool, cases []Case) int {
	var obj uintptr // with Options.Choices: the channel of a lone case
	if r.opt.Choices && len(cases) == 1 && !hasDefault {
		if p, _ := cases[0].channel(); p != nil {
			obj = uintptr(p)
		}
	}
	// A select of several cases touches the channel of the case that
	// proceeds, known once it has: its step is taken as local until then
	// (see releasedObj), and as touching anything if it blocks, or takes
	// its default, having read every channel.
	multi := r.opt.Choices && obj == 0 && len(cases) > 1
	pending := obj
	if multi {
		pending = localObject
	}
	g.pending = pending
	r.yield(g)
	w := &waiter{g: g, cases: cases, chosen: -1}
	for {
		r.mu.Lock()
		g.w = nil
		if w.done {
			r.mu.Unlock()
			break
		}
		r.waiters = slices.DeleteFunc(r.waiters, func(x *waiter) bool { return x == w })
		if w.chosen = r.communicate(w, cases, r.selRng.Perm(len(cases))); w.chosen >= 0 {
			r.mu.Unlock()
			break
		}
		if hasDefault {
			// Pass the baton once, so that a polling loop lets the others
			// run; when none of them can, go on at once: at the select, if
			// none is runnable, or once those that were have blocked (see
			// resumePassing).
			g.mark = markQuiet
			// Under an exhaustive search (Options.Choices) the default is
			// taken at once: the search itself tries the other goroutines
			// at the select's yield point, and a goroutine left blocked
			// here has no operation for a release to complete.
			r.unknownStep(g)
			if !r.opt.Choices && slices.ContainsFunc(r.gs, func(o *gor) bool { return o != g && o.st == runnable }) {
				g.st, g.passing = blocked, true
				r.handOff(g)
				r.mu.Lock()
				g.passing = false
				r.mu.Unlock()
			} else {
				r.mu.Unlock()
			}
			return -1
		}
		if r.free.Load() {
			r.mu.Unlock()
			return selectFree(false, cases)
		}
		r.waiters = append(r.waiters, w)
		g.w = w
		g.st = blocked
		g.mark = markQuiet
		r.markBlocked(g)
		if multi {
			r.unknownStep(g)
			if g.last > 0 && g.last <= len(r.choices) {
				c := &r.choices[g.last-1]
				if c.Waits == nil {
					for _, cs := range cases {
						if p, _ := cs.channel(); p != nil {
							c.Waits = append(c.Waits, uintptr(p))
						}
					}
				}
			}
		}
		g.pending = pending // its next step tries again
		r.handOff(g)
	}
	r.ticks.Add(1)
	r.mu.Lock()
	r.blockedAt = time.Time{}
	r.mu.Unlock()
	if multi && w.chosen >= 0 {
		if p, _ := cases[w.chosen].channel(); p != nil {
			obj = uintptr(p)
		}
	}
	r.releasedObj(obj)
	return w.chosen
}

// unknownStep records, with Options.Choices, that g's current step may
// have touched anything. Called with r.mu held.
func (r *run) unknownStep(g *gor) {
	if r.opt.Choices && g.last > 0 && g.last <= len(r.choices) {
		r.choices[g.last-1].Obj = 0
	}
}

// WaitGroup is the rewrite of a sync.WaitGroup's Go and Wait:
// wg.Go(f) becomes yield.Hook.WG(&wg).Go(f). Its Add and Done are not
// rewritten.
type WaitGroup struct{ wg *sync.WaitGroup }

// WG returns wg's hooks.
func (hooks) WG(wg *sync.WaitGroup) WaitGroup { return WaitGroup{wg} }

// Go is wg.Go, with the goroutine started by Hook.Go: in a controlled run it
// is under control.
func (h WaitGroup) Go(f func()) {
	h.wg.Add(1)
	Hook.Go(func() {
		defer h.wg.Done()
		f()
	})
}

// Wait is wg.Wait. In a controlled run, a goroutine under control that
// waits passes the baton, as one blocked on a channel does, until the
// counter is zero: a goroutine outside control waits on the group and
// then closes a channel that the waiter receives from.
func (h WaitGroup) Wait() {
	if r := active.Load(); r != nil && !r.free.Load() {
		if g := r.self(); g != nil {
			zero := make(chan struct{})
			go func() {
				h.wg.Wait()
				close(zero)
			}()
			r.choose1(g, false, []Case{R((<-chan struct{})(zero))})
			return
		}
	}
	h.wg.Wait()
}

// Package sched is the controlled scheduler behind package yield, whose
// hooks instrumented code calls at each of its synchronization points. The
// hooks are defined here and forwarded by yield; this package's scheduler
// API ([Run], [Options], [Report]) is for the module's own harness
// (linearizability, stress, the controlled stages of budgettest).
//
// The command budgetcheck rewrites the packages under test so that every
// sync/atomic operation, every Lock, Unlock, RLock, RUnlock and TryLock of a
// sync.Mutex or sync.RWMutex, every sync.Once.Do, every channel send and
// receive, every select statement and every call of runtime.Gosched
// passes through package yield first, and yield hands it to this package (see internal/instrument for the
// exact rewrites). The rewritten files go to go test -overlay: the user's
// sources never change, and line numbers in stacks and failures are the
// user's.
//
// Outside a controlled run each hook is one atomic load and a branch (Hook.Go
// two), and then the operation itself, except a select, which goes through
// reflect.Select and allocates its cases; code that is not rewritten does
// not call the hooks at all.
//
// # Controlled runs
//
// [Run] runs a few functions as goroutines, one at a time. At each yield
// point the goroutine holding the baton asks the scheduler who runs next;
// the choice comes from a seeded [Strategy]: [PCT] (random priorities with
// depth−1 priority-change points, after Burckhardt, Kothari, Musuvathi and
// Nagarakatte, "A Randomized Scheduler with Probabilistic Guarantees of
// Finding Bugs", ASPLOS 2010) or [Walk], a uniform random choice at every
// point. Every choice is recorded, and a [Report]'s schedule given back in
// [Options.Schedule] replays the run choice by choice.
//
// Blocking is modelled: a goroutine that would block on an instrumented
// mutex, a channel operation (a range over a channel included, through
// [Range]), a select without a ready case, a Do of a sync.Once that
// another goroutine is inside, a Hook.WG's Wait or a Hook.Sleep, passes
// the baton instead, and runs again once the mutex is released, another
// channel operation completes or the Do returns. A send and a receive on
// an unbuffered channel, both by goroutines under control, meet in the
// scheduler. When every goroutine under control is blocked and each waits
// in a channel operation, the scheduler waits on all their channels at
// once, for a goroutine outside control, a timer or a context to make one
// ready; inside a testing/synctest bubble that wait is durable, so the
// bubble's clock moves straight to the next timer.
//
// The goroutines the code under control starts with a go statement or a
// WaitGroup's Go (a budget's refill loop, started by its constructor
// inside the run; a hedging loop's attempts) are scheduled too, through
// Hook.Go, until every function given to [Run] has returned; then they run
// freely.
//
// # Spinning
//
// A goroutine that waits in a loop for another (a spin lock on an atomic
// flag) makes no progress, and PCT, choosing it while it has the highest
// priority, would never let the other run. So each step is settled, at
// the next yield point of the goroutine that took it, as progress or not:
// an atomic operation through [P] that left the variable's value as it
// was (a load, a failed CompareAndSwap, a store of the same value), a P of
// anything but a pointer to an atomic variable (a read of a field), a
// failed TryLock or TryRLock, a blocking operation that could not complete
// and a select that took its default case made none; so did a call of
// runtime.Gosched, which the rewrite passes through Hook.Spin (Hook.Gosched in
// code that calls the hooks itself). Every other step made progress, and
// so do a goroutine's return and a channel operation that the scheduler
// completes for a blocked goroutine. A goroutine is spinning once 16 of its
// steps in a row made no progress while no step of any goroutine made
// any, and from its Spin until a step makes progress. A spinning
// goroutine is passed over while a goroutine that is not spinning can
// run; when every goroutine that can run spins, the blocked ones are
// candidates too (the one chosen tries its operation again), and the
// least recently chosen runs. Passing a spinning goroutine over is not
// counted among a [Report]'s preemptions. All of this depends only on what
// the goroutines did, so a schedule still replays choice by choice.
//
// # The step bound
//
// A run takes at most [Options.MaxSteps] steps ([DefaultMaxSteps], a
// million, when zero), which bounds the schedule it records (a byte a
// step while it runs). At the yield point past the bound the run falls
// back to free running, and its [Report] is Free and Exhausted, with the
// Reason "step bound of N exceeded (goroutine G at file:line in func): the
// rest of the run is free". Many steps are not a livelock: a budget that
// recounts a ring of slots under its lock takes hundreds a call, and a
// spinning goroutine is passed over long before the bound (see Spinning).
// So the bound only ends control: [Run] then returns once the functions
// have returned, or after [Options.Stall] of free running if they have
// not, leaving them running, and a caller that needs their results waits
// for them itself, under a watchdog of its own.
//
// # Leftovers
//
// A run's control ends when its functions have returned or when it falls
// back; the next Run may start then. The goroutines it leaves behind
// (those its code started that have not returned; after a fallback, all
// that have not), and the goroutines they start with Go, run freely and
// never join a later run: their hooks pass straight through, their
// unlocks and closes do not wake the later run's blocked goroutines, and
// their Hook.Outside does not count as the later run's.
//
// # What is not under control
//
// Goroutines started outside a controlled run, or by code that is not
// rewritten, run freely, and their hooks pass straight through; a
// goroutine under control waiting for one of them is polled. Code that is
// not rewritten (other modules unless named, the standard library's
// internals, the runtime, assembly) has no yield points, and neither have
// WaitGroup's Add and Done, and tickers: a goroutine under control waiting
// on a mutex that one outside control holds is polled. A sync.Cond is
// under control through Hook.C (one whose L is not one of sync's mutexes
// has that lock taken and released outside the run's sight), and
// time.Sleep through Hook.Sleep, where the goroutine passes the baton while
// it sleeps; a sleep in code that is not rewritten keeps the baton. When the goroutine holding the baton blocks
// outside instrumented code (on the network, a syscall, an uninstrumented
// lock), or when every goroutine under control has waited for
// [Options.Stall], the run falls back to free running: every goroutine is
// released, and the [Report] says so and why.
//
// A controlled pass proves only what it explored: no violation in the
// schedules that were run.
//
// # Two audiences
//
// The scheduler's API is for a test harness: [Run], [Options], [Strategy]
// ([PCT], [Walk], [Serial]), [Report], [Choice], [Step], [Site] and
// [Instrumented], and the five hooks a harness's own code calls to take
// part in a run, Hook.Tag, Hook.Between, Hook.PointAt, Hook.Boundary and
// Hook.Outside.
// The other hooks are for the code that the rewrite of cmd/budgetcheck
// produces, which calls them through package yield.
package sched

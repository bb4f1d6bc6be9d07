// Package procs shares GOMAXPROCS among the checks of one test process.
//
// Free runs want more Ps than cores, so that the operating system preempts
// a budget's calls at arbitrary instructions; controlled runs want one,
// since one goroutine runs at a time and each step hands the baton to
// another: with a second P idle, the runtime wakes a thread to steal each
// goroutine made ready, which costs more than the step. Parallel tests may
// want both at once. Each asks here, and holds what it asked for until it
// releases it; the value set is the largest AtLeast held, else one while a
// One is held, else the value before the first hold. A free run beside a
// controlled one thus keeps its Ps, and the controlled one is only slower.
package procs

import (
	"runtime"
	"sync"
)

var (
	mu     sync.Mutex
	base   int         // GOMAXPROCS before the first hold; 0 while none is held
	raised map[int]int // the AtLeast values held, and how many times each
	ones   int         // One holds
)

// Base returns GOMAXPROCS as it was before any hold, the machine's value
// the checks scale with (a count of goroutines, say), whatever the holds
// of other tests have set meanwhile.
func Base() int {
	mu.Lock()
	defer mu.Unlock()
	if base == 0 {
		return runtime.GOMAXPROCS(0)
	}
	return base
}

// AtLeast raises GOMAXPROCS to at least n until release is called, and
// returns max(n, Base()), the value it guarantees meanwhile.
func AtLeast(n int) (procs int, release func()) {
	mu.Lock()
	defer mu.Unlock()
	hold()
	if raised == nil {
		raised = map[int]int{}
	}
	raised[n]++
	apply()
	return max(n, base), sync.OnceFunc(func() {
		mu.Lock()
		defer mu.Unlock()
		if raised[n]--; raised[n] == 0 {
			delete(raised, n)
		}
		apply()
	})
}

// One lowers GOMAXPROCS to one, while no AtLeast is held, until release
// is called.
func One() (release func()) {
	mu.Lock()
	defer mu.Unlock()
	hold()
	ones++
	apply()
	return sync.OnceFunc(func() {
		mu.Lock()
		defer mu.Unlock()
		ones--
		apply()
	})
}

// hold records the value before the first hold. Called with mu held.
func hold() {
	if base == 0 {
		base = runtime.GOMAXPROCS(0)
	}
}

// apply sets GOMAXPROCS to what the holds ask for, and forgets the base
// once none is left. Called with mu held.
func apply() {
	want := base
	switch {
	case len(raised) > 0:
		for n := range raised {
			want = max(want, n)
		}
	case ones > 0:
		want = 1
	}
	if runtime.GOMAXPROCS(0) != want {
		runtime.GOMAXPROCS(want) // stops the world: only on a change
	}
	if len(raised) == 0 && ones == 0 {
		base = 0
	}
}

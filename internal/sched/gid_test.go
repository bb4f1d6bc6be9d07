package sched

import (
	"sync"
	"testing"
)

// deep recurses n frames, growing the stack, and returns id() from the
// bottom.
//
//go:noinline
func deep(n int, id func() uintptr) uintptr {
	var pad [256]byte
	if n == 0 {
		return id() + uintptr(pad[0])
	}
	return deep(n-1, id)
}

func testIdentity(t *testing.T, id func() uintptr) {
	t.Helper()
	self := id()
	if self == 0 {
		t.Fatal("the identity of a goroutine is 0")
	}
	if got := deep(2000, id); got != self {
		t.Fatalf("the identity changed when the stack grew: %#x, then %#x", self, got)
	}
	const n = 16
	ids := make([]uintptr, n)
	var wg, started sync.WaitGroup
	hold := make(chan struct{})
	started.Add(n)
	for i := range n {
		wg.Go(func() {
			ids[i] = id()
			started.Done()
			<-hold // live until every one has read its identity
			if again := deep(500, id); again != ids[i] {
				t.Errorf("goroutine %d: the identity changed from %#x to %#x", i, ids[i], again)
			}
		})
	}
	started.Wait()
	close(hold)
	wg.Wait()
	seen := map[uintptr]int{self: -1}
	for i, x := range ids {
		if j, dup := seen[x]; dup {
			t.Fatalf("goroutines %d and %d, both live, have the identity %#x", j, i, x)
		}
		seen[x] = i
	}
}

func TestCurGTellsLiveGoroutinesApart(t *testing.T) { testIdentity(t, curG) }

// The fallback of platforms without getg.
func TestGoidTellsLiveGoroutinesApart(t *testing.T) { testIdentity(t, goid) }

// A run holds no baton holder while nobody can run, so that a goroutine
// given the descriptor of one that returned is not taken for it.
func TestPickForgetsTheHolderWhenNoneCanRun(t *testing.T) {
	r := newRun(Options{Length: 100}, 2)
	r.mu.Lock()
	defer r.mu.Unlock()
	if g := r.pickLocked(nil); g == nil || r.cur.Load() != g {
		t.Fatalf("picked %v, holder %v", g, r.cur.Load())
	}
	r.gs[0].st, r.gs[1].st = done, blocked
	if g := r.pickLocked(r.gs[0]); g != nil || r.cur.Load() != nil {
		t.Fatalf("with none runnable: picked %v, holder %v; want neither", g, r.cur.Load())
	}
}

package procs

import (
	"runtime"
	"testing"
)

func TestHoldsShareGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	got := func() int { return runtime.GOMAXPROCS(0) }

	releaseOne := One()
	if got() != 1 || Base() != 3 {
		t.Fatalf("after One: GOMAXPROCS %d, Base %d; want 1 and 3", got(), Base())
	}
	// A free run beside the controlled one gets its Ps, and the count it
	// scales with is the base's, not the 1 the other set.
	ps, releaseAtLeast := AtLeast(8)
	if ps != 8 || got() != 8 {
		t.Fatalf("AtLeast(8) beside One = %d, GOMAXPROCS %d; want 8 and 8", ps, got())
	}
	ps16, release16 := AtLeast(16)
	if ps16 != 16 || got() != 16 {
		t.Fatalf("AtLeast(16) = %d, GOMAXPROCS %d; want 16 and 16", ps16, got())
	}
	release16()
	release16() // a second call does nothing
	if got() != 8 {
		t.Fatalf("after the 16 is released: GOMAXPROCS %d, want 8", got())
	}
	releaseAtLeast()
	if got() != 1 {
		t.Fatalf("after every AtLeast is released, One still held: GOMAXPROCS %d, want 1", got())
	}
	releaseOne()
	if got() != 3 {
		t.Fatalf("after every hold is released: GOMAXPROCS %d, want the base, 3", got())
	}

	// Released in any order, the base comes back; a base above the ask
	// is kept.
	runtime.GOMAXPROCS(12)
	ps, r1 := AtLeast(8)
	r2 := One()
	if ps != 12 || got() != 12 {
		t.Fatalf("AtLeast(8) on a base of 12 = %d, GOMAXPROCS %d; want 12 and 12", ps, got())
	}
	r1()
	if got() != 1 {
		t.Fatalf("One alone: GOMAXPROCS %d, want 1", got())
	}
	r2()
	if got() != 12 {
		t.Fatalf("no hold: GOMAXPROCS %d, want 12", got())
	}
}

package naive

import (
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/sched"
)

// Under the controlled scheduler, two goroutines that call the budget
// switch only at yield points. Instrumented with Fields, the budget's
// reads and writes of its tokens are yield points, and some schedule
// grants both retries of the last 5 tokens (a switch between the check and
// the charge) and some loses a success (a switch between the read and the
// write of n.tokens++). Not instrumented, each call runs whole and neither
// happens.
func TestControlledRunsSplitTheReadAndTheWrite(t *testing.T) {
	overspent, lost := false, false
	for seed := uint64(1); seed <= 200 && !(overspent && lost); seed++ {
		opt := sched.Options{Seed: seed, Strategy: sched.Walk(), Length: 20}

		n := New(5)
		var granted [2]bool
		rep := sched.Run(opt,
			func() { granted[0] = n.Retry(budget.Transient) },
			func() { granted[1] = n.Retry(budget.Transient) })
		if rep.Free {
			t.Fatalf("seed %d: %v", seed, rep)
		}
		if granted[0] && granted[1] {
			if !overspent {
				t.Logf("both retries granted, %d tokens left: %v", n.Tokens(), rep)
			}
			overspent = true
		}

		n = New(0)
		success := func() { n.Success(budget.Transient) }
		if rep = sched.Run(opt, success, success); rep.Free {
			t.Fatalf("seed %d: %v", seed, rep)
		}
		if n.Tokens() != 2 {
			if !lost {
				t.Logf("two successes earned %d tokens: %v", n.Tokens(), rep)
			}
			lost = true
		}
	}
	want := sched.Instrumented()
	if overspent != want || lost != want {
		t.Errorf("instrumented %v: found an overspend %v, a lost success %v; want %v and %v", want, overspent, lost, want, want)
	}
}

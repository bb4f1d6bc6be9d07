package sched_test

import (
	"sync"
	"testing"

	"github.com/retrybudget/retrybudget/internal/sched"
)

// sectioned reads and writes fields under a mutex, each a yield point as the
// rewrite makes it; racy writes one outside it.
type sectioned struct {
	mu   sync.Mutex
	ring [32]int64
	n    int64
}

func (g *sectioned) locked() {
	sched.Hook.M(&g.mu).Lock()
	var s int64
	for i := range g.ring {
		s += sched.P(g.ring[i])
	}
	sched.Hook.Point()
	g.n = sched.W(s + 1)
	sched.Hook.M(&g.mu).Unlock()
}

func (g *sectioned) racy() {
	sched.Hook.Point()
	g.n = sched.W(g.n + 1)
}

// Inside a critical section a field's reads and writes take no step, until
// a goroutine inside an operation stores into a field holding no mutex:
// the runs after that switch inside critical sections too (Options.Fine),
// until ResetFine.
func TestFieldsInsideACriticalSectionTakeNoStep(t *testing.T) {
	sched.ResetFine()
	defer sched.ResetFine()
	steps := func(racy bool) (int, bool) {
		g := new(sectioned)
		body := func() {
			sched.Hook.Tag(1)
			g.locked()
			if racy {
				g.racy()
			}
			sched.Hook.Tag(0)
		}
		rep := sched.Run(sched.Options{Seed: 1, Strategy: sched.Serial()}, body, body)
		return len(rep.Options.Schedule), rep.Options.Fine
	}
	coarse, fine := steps(false)
	if fine || coarse > 12 {
		t.Fatalf("two calls of a locked section of 34 field accesses took %d steps (fine %v), want a few", coarse, fine)
	}
	if _, fine := steps(true); fine {
		t.Fatal("the run that first stores outside a lock is not fine: it began before the store")
	}
	after, fine := steps(false)
	if !fine || after < 60 {
		t.Fatalf("after a store outside any lock, the same calls took %d steps (fine %v), want one per field access", after, fine)
	}
	sched.ResetFine()
	if again, fine := steps(false); fine || again != coarse {
		t.Fatalf("after ResetFine, %d steps (fine %v), want %d as at first", again, fine, coarse)
	}
}

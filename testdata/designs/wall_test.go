package designs

import (
	"io"
	"math"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

// wallDesignOf is designOf for a budget that reads time.Now itself: the
// suite runs it with WallClock set, and the sequential comparison runs it
// in a synctest bubble, where a clock step is a time.Sleep.
func wallDesignOf[S any](name string, m model.Model[S], build func() budget.Budget) design {
	sub := budgettest.Subject[S]{
		Name:      name,
		Model:     m,
		New:       func(*testing.T, budget.Clock) budget.Budget { return build() },
		WallClock: true,
	}
	return design{
		name: name,
		run:  func(t *testing.T) { budgettest.Run(t, sub) },
		seq: func(t *testing.T, seed uint64) {
			synctest.Test(t, func(t *testing.T) { sequentialWall(t, seed, m, build) })
		},
	}
}

// sequentialWall is sequential for a wall-clock budget, inside a synctest
// bubble: it starts at the model's Init (the budget's own origin is its
// construction) and makes only forward clock steps, each a time.Sleep,
// since the wall clock cannot be stepped back.
func sequentialWall[S any](t *testing.T, seed uint64, m model.Model[S], build func() budget.Budget) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x3a11))
	scale, _ := m.(model.Timed).Timing()
	s := m.Init()
	b := build()
	if c, ok := b.(io.Closer); ok {
		defer c.Close()
	}
	bal, _ := m.(model.Balanced[S])
	av, _ := b.(interface{ Available() float64 })

	var trail []string
	for i := range 400 {
		op := randomOp(rng, scale, false)
		if op.Op == model.Advance && op.D <= 0 {
			continue
		}
		trail = append(trail, op.String())
		var got bool
		if op.Op == model.Advance {
			time.Sleep(op.D)
		} else {
			got = apply(b, nil, op)
		}
		var want bool
		s, want = m.Step(s, op)
		if got != want {
			t.Fatalf("seed %d: operation %d, %v: budget answered %v, model %v\nops: %v\nmodel state: %s",
				seed, i, op, got, want, trail, m.DescribeState(s))
		}
		if bal != nil && av != nil {
			if g, w := av.Available(), float64(bal.Balance(s))/1000; math.Abs(g-w) > 1e-9 {
				t.Fatalf("seed %d: after operation %d, %v: Available() = %v, model balance %v\nops: %v\nmodel state: %s",
					seed, i, op, g, w, trail, m.DescribeState(s))
			}
		}
	}
}

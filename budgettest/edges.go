package budgettest

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/fuzzops"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
)

// An edge is one sequence of the Edges check: the instant the budget's
// clock reads when it is built, and the operations after that.
type edge struct {
	start time.Duration
	ops   []model.Op
}

// edges returns the Edges check's sequences: a walk across slot
// boundaries from each instant where slot arithmetic tends to break (zero,
// just below it, the ends of int64, a horizon below the top), each a
// multiple of the scale, for a model that can start anywhere; from zero
// only otherwise.
func (sub Subject[S]) edges() []edge {
	scale, horizon := sub.Scale, sub.Horizon
	if horizon == 0 {
		horizon = 100 * scale
	}
	starts := []time.Duration{0}
	if _, ok := sub.Model.(model.Starter[S]); ok {
		// Multiples of the scale, so that a budget whose slots are aligned
		// to its first reading, rather than to instant 0, meets the
		// model's slots exactly: the edges are in the arithmetic, not in
		// the alignment.
		step := max(scale, 1)
		down := func(t time.Duration) time.Duration { return t / step * step } // toward zero
		starts = append(starts, -step, down(-horizon-step), down(math.MinInt64)+step,
			down(math.MaxInt64-horizon-step), down(math.MaxInt64-step))
	}
	// The walk: requests and retries in each slot, a step of about one
	// slot between, once through the horizon and past it; then steps that
	// land one nanosecond either side of a boundary.
	var walk []model.Op
	slots := 1
	if scale > 0 {
		slots = int(min(horizon/scale+2, 48))
	}
	for i := range slots {
		walk = append(walk, model.OpRequest, model.OpRequest, model.OpRequest, model.OpRetry(model.Transient),
			model.OpRetry(model.Throttled), model.OpSuccess(model.Transient))
		if scale > 0 {
			walk = append(walk, model.OpAdvance(scale+time.Duration(i%3)-1))
		}
	}
	if scale > 0 {
		walk = append(walk, model.OpAdvance(scale-1), model.OpRetry(model.Transient), model.OpAdvance(1), model.OpRetry(model.Transient),
			model.OpAdvance(horizon), model.OpRequest, model.OpRetry(model.Throttled), model.OpAdvance(-scale), model.OpRetry(model.Transient))
	}
	var out []edge
	seen := map[time.Duration]bool{}
	for _, s := range starts {
		if !seen[s] {
			seen[s] = true
			out = append(out, edge{start: s, ops: walk})
		}
	}
	return out
}

// edge replays ops on a budget built on a clock reading start, and on the
// model from InitAt(start).
func (sub Subject[S]) edge(t *testing.T, e edge) error {
	hs := sub.harness(t)
	init, ok := hs.InitAt(e.start)
	if !ok {
		return nil // the model cannot start there: nothing to compare
	}
	err := hs.Guard(fmt.Sprintf("the Edges check from %d ns", int64(e.start)), func() error {
		return seqcheck.Replay(hs, init, e.start, e.ops)
	})
	if err == nil || errors.As(err, new(*harness.Fault)) {
		return err
	}
	return fail(ruleEdges, "%s: built on a clock reading %d ns: %v", sub.name(), int64(e.start), err)
}

func checkEdges[S any](t *testing.T, sub Subject[S]) error {
	if sub.WallClock {
		return skip("the budget reads the wall clock, which cannot be started at an edge")
	}
	for _, e := range sub.edges() {
		if err := sub.edge(t, e); err != nil {
			return err
		}
	}
	return nil
}

// Fuzz is the Edges check as a fuzz target: the fuzzer chooses the instant
// the budget's clock starts at and the operations after it (decoded by
// fuzzops.Ops), and every answer, and balance, is compared with the model's.
// The Edges sequences are its seed corpus, so go test without -fuzz runs
// them. Typical use is
//
//	func FuzzMyBudget(f *testing.F) {
//		budgettest.Fuzz(f, subject)
//	}
//
// run with go test -fuzz FuzzMyBudget. A model that is not a model.Starter
// is fuzzed from instant 0 only; a wall-clock subject is skipped.
func Fuzz[S any](f *testing.F, sub Subject[S]) {
	f.Helper()
	sub, fl := sub.checked()
	if fl != nil {
		f.Fatal(fl)
	}
	if sub.WallClock {
		f.Skip("the budget reads the wall clock, which cannot be started at an edge")
	}
	for _, e := range sub.edges() {
		f.Add(int64(e.start), fuzzops.Encode(e.ops))
	}
	f.Fuzz(func(t *testing.T, start int64, data []byte) {
		if err := sub.edge(t, edge{start: time.Duration(start), ops: fuzzops.Ops(data)}); err != nil {
			t.Fatal(sub.failure(err))
		}
	})
}

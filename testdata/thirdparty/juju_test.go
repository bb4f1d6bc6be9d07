package thirdparty

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// TestJujuClockBack pins juju's rule for a clock that goes back, which
// JujuModel states (ratelimit.go:312–323, adjustavailableTokens, whose
// comment asks for a tick "in the future" and does not check it): a step
// back below latestTick takes its ticks' tokens out of a bucket that is
// not full, so the balance follows the clock back and forth, and a full
// bucket loses nothing but moves latestTick back, so those ticks are paid
// again on the way forward. The forward-only rule of budget.Clock's
// documentation (an earlier reading counts as the latest seen) would
// grant 6 retries right after the step back, where juju grants none until
// the clock is back where it was, and would grant none, not 10, after a
// new bucket's step back and forward.
func TestJujuClockBack(t *testing.T) {
	run := func(why string, steps func(retry func(int, int), advance func(time.Duration))) {
		clock := new(budget.ManualClock)
		b := NewJuju(jujuModel, clock)
		s := jujuModel.Init()
		retry := func(n, want int) { // want grants of n retries
			t.Helper()
			got, m := 0, 0
			for range n {
				if b.Retry(budget.Transient) {
					got++
				}
				var ok bool
				if s, ok = jujuModel.Step(s, model.OpRetry(model.Transient)); ok {
					m++
				}
			}
			if got != want || m != want {
				t.Fatalf("%s: juju granted %d, the model %d, want %d (model state %s)", why, got, m, want, jujuModel.DescribeState(s))
			}
		}
		advance := func(d time.Duration) {
			clock.Advance(d)
			s, _ = jujuModel.Step(s, model.OpAdvance(d))
		}
		steps(retry, advance)
	}
	run("the balance follows the clock", func(retry func(int, int), advance func(time.Duration)) {
		retry(20, 10)                    // tick 0: the full bucket, drained
		advance(500 * time.Millisecond)  // tick 5: +10
		retry(4, 4)                      // 6 left, latestTick 5
		advance(-300 * time.Millisecond) // tick 2: −6, to 0
		retry(20, 0)
		advance(300 * time.Millisecond) // tick 5 again: +6
		retry(20, 6)
	})
	run("a full bucket pays its ticks twice", func(retry func(int, int), advance func(time.Duration)) {
		advance(-500 * time.Millisecond) // tick −5, the bucket full: latestTick −5
		retry(20, 10)
		advance(500 * time.Millisecond) // tick 0: +10, for ticks before the bucket began
		retry(20, 10)
	})
}

// TestJujuSequential compares juju with JujuModel over random operations
// from several starting instants, the ends of int64 included, with clock
// steps around the tick both ways and jumps that wrap the clock.
func TestJujuSequential(t *testing.T) {
	starts := []time.Duration{0, 7 * time.Second / 3, -5 * time.Second, math.MaxInt64 - time.Minute, math.MinInt64 + 3}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 0x1c1c))
		start := starts[int(seed)%len(starts)]
		clock := new(budget.ManualClock)
		clock.Set(start)
		b := NewJuju(jujuModel, clock)
		s := jujuModel.InitAt(start)
		for i := range 400 {
			var op model.Op
			switch r := rng.IntN(10); {
			case r < 5:
				op = model.OpRetry(model.Kind(rng.IntN(4)))
			case r < 6:
				op = model.OpSuccess(model.Transient)
			case r < 7:
				op = model.OpRequest
			case r < 9:
				op = model.OpAdvance(time.Duration(rng.Int64N(int64(3*jujuModel.FillInterval))) - jujuModel.FillInterval)
			default:
				op = model.OpAdvance(time.Duration(rng.Uint64())) // anywhere, wrapping
			}
			var got bool
			switch op.Op {
			case model.Retry:
				got = b.Retry(op.Kind)
			case model.Success:
				b.Success(op.Kind)
			case model.Request:
				b.Request()
			case model.Advance:
				clock.Advance(op.D)
			}
			var want bool
			s, want = jujuModel.Step(s, op)
			if got != want {
				t.Fatalf("seed %d, start %v, op %d %v: juju %v, model %v (state %s)", seed, start, i, op, got, want, jujuModel.DescribeState(s))
			}
		}
	}
}

package lostupdates

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// checkSequential drives a budget and its model with the same random
// operations, one at a time from one goroutine, and fails on the first
// answer or balance that differs. It proves that each broken budget here
// is broken only under concurrency.
func checkSequential[S any](t *testing.T, m model.Model[S], build func(budget.Clock) budget.Budget) {
	t.Helper()
	_, structured := m.(model.Structured)
	var scale time.Duration = time.Second
	if tm, ok := m.(model.Timed); ok {
		if sc, _ := tm.Timing(); sc > 0 {
			scale = sc
		}
	}
	starts := []time.Duration{0, -1, 1, -scale, scale - 1, math.MinInt64, math.MinInt64 + 1, math.MaxInt64, math.MaxInt64 - scale, -7 * scale / 2}
	var granted, denied int
	defer func() { t.Logf("%d retries granted, %d denied", granted, denied) }()
	for seed := uint64(0); seed < 400; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		start := starts[int(seed)%len(starts)]
		if seed >= uint64(len(starts))*10 {
			start = time.Duration(rng.Int64()) - time.Duration(rng.Int64())
		}
		clock := new(budget.ManualClock)
		clock.Set(start)
		s := m.Init()
		if st, ok := m.(model.Starter[S]); ok {
			s = st.InitAt(start)
		} else {
			start = 0
			clock.Set(0)
		}
		b := build(clock)
		ifb, _ := b.(budget.InFlightBudget)
		bal, hasBal := m.(model.Balanced[S])
		avail, hasAvail := b.(interface{ Available() float64 })
		var hist []model.Op
		// A phase's share of retries and successes, from steady success to
		// an outage.
		retryShare := 0
		for i := 0; i < 3000; i++ {
			if i%300 == 0 {
				retryShare = rng.IntN(101)
			}
			op := randomOp(rng, structured, retryShare, scale)
			hist = append(hist, op)
			var got bool
			switch op.Op {
			case model.Request:
				b.Request()
			case model.Retry:
				got = b.Retry(op.Kind)
			case model.Success:
				b.Success(op.Kind)
			case model.AttemptEnd:
				ifb.AttemptEnd(op.Kind)
			case model.CallEnd:
				ifb.CallEnd()
			case model.Advance:
				clock.Advance(op.D)
			}
			var want bool
			s, want = m.Step(s, op)
			if op.Op == model.Retry {
				if want {
					granted++
				} else {
					denied++
				}
			}
			if got != want {
				t.Fatalf("seed %d start %v op %d %v: budget %v, model %v (model state %s); last ops %v",
					seed, start, i, op, got, want, m.DescribeState(s), tail(hist, 8))
			}
			if hasBal && hasAvail {
				if g, w := int64(math.Round(avail.Available()*1000)), bal.Balance(s); g != w {
					t.Fatalf("seed %d start %v op %d %v: Available %d milli, model balance %d (model state %s); last ops %v",
						seed, start, i, op, g, w, m.DescribeState(s), tail(hist, 8))
				}
			}
		}
	}
}

func tail(ops []model.Op, n int) []model.Op { return ops[max(0, len(ops)-n):] }

func randomOp(rng *rand.Rand, structured bool, retryShare int, scale time.Duration) model.Op {
	kind := func() model.Kind {
		switch r := rng.IntN(20); {
		case r < 9:
			return model.Transient
		case r < 18:
			return model.Throttled
		case r < 19:
			return model.FirstAttempt
		default:
			return model.Kind(3 + rng.IntN(250))
		}
	}
	if structured {
		switch r := rng.IntN(100); {
		case r < retryShare/2:
			return model.OpRetry(kind())
		case r < 40:
			return model.OpRequest
		case r < 60:
			return model.OpAttemptEnd(kind())
		case r < 75:
			return model.OpCallEnd
		case r < 85:
			return model.OpSuccess(kind())
		default:
			return model.OpRetry(kind())
		}
	}
	r := rng.IntN(100)
	switch {
	case r < 8:
		var d time.Duration
		switch rng.IntN(8) {
		case 0:
			d = time.Duration(rng.Int64N(int64(3 * scale)))
		case 1:
			d = scale
		case 2:
			d = scale - 1
		case 3:
			d = 1
		case 4:
			d = -time.Duration(rng.Int64N(int64(2 * scale)))
		case 5:
			d = time.Duration(rng.Int64()) - time.Duration(rng.Int64())
		case 6:
			d = time.Duration(int64(1) << (40 + rng.IntN(23)))
		default:
			d = time.Duration(rng.Int64N(int64(scale) / 10))
		}
		return model.OpAdvance(d)
	case r < 8+retryShare*60/100:
		return model.OpRetry(kind())
	case r < 80:
		return model.OpRequest
	default:
		return model.OpSuccess(kind())
	}
}

func TestSequentialAddClampBucket(t *testing.T) {
	checkSequential(t, model.AWS(), newAddClamp)
}

func TestSequentialRefundClampBucket(t *testing.T) {
	checkSequential(t, smallBucket, newRefundClamp)
}

func TestSequentialCASThrottle(t *testing.T) {
	checkSequential(t, grpcThrottle, newCASThrottle)
}

func TestSequentialCASBucket2(t *testing.T) {
	checkSequential(t, model.AWS(), newCASBucket2)
}

func TestSequentialRotateOutsideLockRatio(t *testing.T) {
	checkSequential(t, model.SRE(), newRotateOutside)
}

func TestSequentialDoubleCheckedRatio(t *testing.T) {
	checkSequential(t, model.SRE(), newDoubleChecked)
}

func TestSequentialSplitAtomicsInFlight(t *testing.T) {
	checkSequential(t, model.EnvoyDefaults(), newSplitInFlight)
}

func TestSequentialCachedDenyBucket(t *testing.T) {
	checkSequential(t, model.AWS(), newCachedDeny)
}

func TestSequentialLazyRingRatio(t *testing.T) {
	checkSequential(t, model.SRE(), newLazyRing)
}

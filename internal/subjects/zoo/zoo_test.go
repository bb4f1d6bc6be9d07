package zoo

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/race"
	"github.com/retrybudget/retrybudget/model"
)

var plainBucket = model.TokenBucket{Capacity: 20000, TransientCost: 14000, ThrottledCost: 5000, SuccessBonus: 1000}

var refillModel = model.TokenBucket{Capacity: 30000, TransientCost: 14000, ThrottledCost: 5000, SuccessBonus: 1000, RefillPerSecond: 10000}

var snapModel = model.TokenBucket{Capacity: 50000, TransientCost: 14000, ThrottledCost: 5000, SuccessBonus: 1000, RefillPerSecond: 3000}

var seqlockModel = model.TokenBucket{Capacity: 40000, TransientCost: 14000, ThrottledCost: 5000, SuccessBonus: 1000, RefillPerSecond: 4000}

// floatModel's quantities are not round in binary: 0.75, 0.05 and 1.25 tokens.
var floatModel = model.TokenBucket{Capacity: 25000, TransientCost: 2500, ThrottledCost: 750, SuccessBonus: 50, RefillPerSecond: 1250}

var throttleModel = model.Throttle{Max: 10000, Ratio: 100}

var (
	_ budget.Budget = (*RWBucket)(nil)
	_ budget.Budget = (*CASBucket)(nil)
	_ budget.Budget = (*RefillBucket)(nil)
	_ budget.Budget = (*RingRatio)(nil)
	_ budget.Budget = (*ActorThrottle)(nil)
	_ budget.Budget = (*SnapBucket)(nil)
	_ budget.Budget = (*SeqlockBucket)(nil)
	_ budget.Budget = (*FloatBucket)(nil)

	_ budget.InFlightBudget = (*MutexInFlight)(nil)
	_ budget.InFlightBudget = (*PackedInFlight)(nil)
	_ budget.InFlightBudget = (*ActorInFlight)(nil)
	_ budget.InFlightBudget = (*FailsafeRuleInFlight)(nil)
)

// packedModel is Envoy's rule with a budget_percent of 50 and a
// min_retry_concurrency of 1, so that the share decides sooner.
var packedModel = model.InFlight{PPM: 500_000, MinConcurrency: 1, Rule: model.Envoy}

func rwBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.RWBucket", Model: plainBucket,
		New: func(*testing.T, budget.Clock) budget.Budget {
			m := plainBucket
			return NewRWBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus)
		},
	}
}

func TestRWBucket(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	budgettest.Run(t, rwBucketSubject())
}

func casBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.CASBucket", Model: plainBucket,
		New: func(*testing.T, budget.Clock) budget.Budget {
			m := plainBucket
			return NewCASBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus)
		},
	}
}

func TestCASBucket(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	budgettest.Run(t, casBucketSubject())
}

func refillBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.RefillBucket", Model: refillModel,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			m := refillModel
			return NewRefillBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus, m.RefillPerSecond, c)
		},
		Scale: 1400 * time.Millisecond, Horizon: 3 * time.Second,
	}
}

func TestRefillBucket(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	budgettest.Run(t, refillBucketSubject())
}

func ringRatioSubject() budgettest.Subject[model.RatioState] {
	m := model.SRE()
	return budgettest.Subject[model.RatioState]{
		Name: "zoo.RingRatio", Model: m,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			return NewRingRatio(m.PPM, m.Window, m.Slots, m.Floor, c)
		},
		Scale: time.Second, Horizon: 20 * time.Second,
	}
}

func TestRingRatio(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	budgettest.Run(t, ringRatioSubject())
}

func actorThrottleSubject() budgettest.Subject[model.ThrottleState] {
	return budgettest.Subject[model.ThrottleState]{
		Name: "zoo.ActorThrottle", Model: throttleModel,
		New: func(*testing.T, budget.Clock) budget.Budget {
			return NewActorThrottle(throttleModel.Max, throttleModel.Ratio)
		},
	}
}

func TestActorThrottle(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	budgettest.Run(t, actorThrottleSubject())
}

func snapBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.SnapBucket", Model: snapModel,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			return NewSnapBucket(snapModel, c)
		},
		Scale: 2 * time.Second, Horizon: 30 * time.Second,
	}
}

func TestSnapBucket(t *testing.T) { budgettest.Run(t, snapBucketSubject()) }

func seqlockBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.SeqlockBucket", Model: seqlockModel,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			m := seqlockModel
			return NewSeqlockBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus, m.RefillPerSecond, c)
		},
		Scale: 1250 * time.Millisecond, Horizon: 20 * time.Second,
	}
}

func TestSeqlockBucket(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	budgettest.Run(t, seqlockBucketSubject())
}

func floatBucketSubject() budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{
		Name: "zoo.FloatBucket", Model: floatModel,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			return NewFloatBucket(25, 2.5, 0.75, 0.05, 1.25, c)
		},
		Scale: 600 * time.Millisecond, Horizon: 40 * time.Second,
	}
}

func TestFloatBucket(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	budgettest.Run(t, floatBucketSubject())
}

func mutexInFlightSubject() budgettest.Subject[model.InFlightState] {
	m := model.EnvoyDefaults()
	return budgettest.Subject[model.InFlightState]{
		Name: "zoo.MutexInFlight", Model: m,
		New: func(*testing.T, budget.Clock) budget.Budget {
			return NewMutexInFlight(m.PPM, m.MinConcurrency)
		},
	}
}

func TestMutexInFlight(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	budgettest.Run(t, mutexInFlightSubject())
}

func packedInFlightSubject() budgettest.Subject[model.InFlightState] {
	return budgettest.Subject[model.InFlightState]{
		Name: "zoo.PackedInFlight", Model: packedModel,
		New: func(*testing.T, budget.Clock) budget.Budget {
			return NewPackedInFlight(50, 1)
		},
	}
}

func TestPackedInFlight(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	budgettest.Run(t, packedInFlightSubject())
}

func actorInFlightSubject() budgettest.Subject[model.InFlightState] {
	m := model.EnvoyDefaults()
	return budgettest.Subject[model.InFlightState]{
		Name: "zoo.ActorInFlight", Model: m,
		New: func(*testing.T, budget.Clock) budget.Budget {
			return NewActorInFlight(m.PPM, m.MinConcurrency)
		},
	}
}

func TestActorInFlight(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	budgettest.Run(t, actorInFlightSubject())
}

func failsafeRuleInFlightSubject() budgettest.Subject[model.InFlightState] {
	m := model.FailsafeDefaults()
	return budgettest.Subject[model.InFlightState]{
		Name: "zoo.FailsafeRuleInFlight", Model: m,
		New: func(*testing.T, budget.Clock) budget.Budget {
			return NewFailsafeRuleInFlight(m.PPM, m.MinConcurrency)
		},
	}
}

func TestFailsafeRuleInFlight(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	budgettest.Run(t, failsafeRuleInFlightSubject())
}

// The in-flight budgets answer, and report balances, exactly as their
// models do on long random sequences that include input breaking the call
// structure (ends of nothing in flight, non-retry kinds), and on every
// parameter corner: no share, the whole share, no floor.
func TestInFlightMatchModel(t *testing.T) {
	t.Parallel()
	type inflight interface {
		budget.InFlightBudget
		Available() float64
	}
	type build func(m model.InFlight) inflight
	envoy := map[string]build{
		"MutexInFlight": func(m model.InFlight) inflight { return NewMutexInFlight(m.PPM, m.MinConcurrency) },
		"PackedInFlight": func(m model.InFlight) inflight {
			return NewPackedInFlight(float64(m.PPM)/10_000, uint32(m.MinConcurrency))
		},
		"ActorInFlight": func(m model.InFlight) inflight { return NewActorInFlight(m.PPM, m.MinConcurrency) },
	}
	failsafe := map[string]build{
		"FailsafeRuleInFlight": func(m model.InFlight) inflight { return NewFailsafeRuleInFlight(m.PPM, m.MinConcurrency) },
	}
	for _, rule := range []model.InFlightRule{model.Envoy, model.Failsafe} {
		builds := envoy
		if rule == model.Failsafe {
			builds = failsafe
		}
		for _, p := range [][2]int64{{200_000, 3}, {500_000, 1}, {0, 0}, {0, 2}, {1_000_000, 0}, {999_999, 0}, {333_333, 5}, {1, 4}} {
			m := model.InFlight{PPM: p[0], MinConcurrency: p[1], Rule: rule}
			for name, newBudget := range builds {
				t.Run(fmt.Sprintf("%s/ppm=%d,min=%d", name, p[0], p[1]), func(t *testing.T) {
					b := newBudget(m)
					if c, ok := b.(interface{ Close() error }); ok {
						defer c.Close()
					}
					rng := rand.New(rand.NewPCG(uint64(p[0]), uint64(p[1])))
					s := m.Init()
					for i := range 20_000 {
						var op model.Op
						k := model.Kind(rng.IntN(4))
						switch r := rng.IntN(12); {
						case r < 3:
							op = model.OpRequest
						case r < 5:
							op = model.Op{Op: model.CallEnd}
						case r < 9:
							op = model.OpRetry(k)
						case r < 11:
							op = model.Op{Op: model.AttemptEnd, Kind: k}
						default:
							op = model.OpSuccess(k)
						}
						var got bool
						switch op.Op {
						case model.Request:
							b.Request()
						case model.CallEnd:
							b.CallEnd()
						case model.Retry:
							got = b.Retry(budget.Kind(op.Kind))
						case model.AttemptEnd:
							b.AttemptEnd(budget.Kind(op.Kind))
						case model.Success:
							b.Success(budget.Kind(op.Kind))
						}
						var want bool
						s, want = m.Step(s, op)
						if got != want {
							t.Fatalf("op %d %s: got %v, model %v (%s)", i, op, got, want, m.DescribeState(s))
						}
						if a, w := b.Available(), float64(m.Balance(s))/1000; a != w {
							t.Fatalf("op %d %s: Available() = %v, model %v (%s)", i, op, a, w, m.DescribeState(s))
						}
					}
				})
			}
		}
	}
}

// FloatBucket and SeqlockBucket answer, and report balances, exactly as the
// model does on long random sequences with clock steps far below and far
// above a milli-token's worth of refill, driven one call at a time.
func TestFloatAndSeqlockMatchModel(t *testing.T) {
	t.Parallel()
	type availer interface {
		budget.Budget
		Available() float64
	}
	for _, tc := range []struct {
		name  string
		m     model.TokenBucket
		build func(budget.Clock) availer
	}{
		{"FloatBucket", floatModel, func(c budget.Clock) availer { return NewFloatBucket(25, 2.5, 0.75, 0.05, 1.25, c) }},
		{"SeqlockBucket", seqlockModel, func(c budget.Clock) availer {
			m := seqlockModel
			return NewSeqlockBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus, m.RefillPerSecond, c)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			clock := new(budget.ManualClock)
			b := tc.build(clock)
			s := tc.m.Init()
			steps := []time.Duration{1, 7, 300 * time.Microsecond, 799 * time.Microsecond, 3 * time.Millisecond, 333 * time.Millisecond, 5 * time.Second, -time.Second}
			for i := range 200_000 {
				var op model.Op
				switch r := rng.IntN(10); {
				case r < 4:
					op = model.OpAdvance(steps[rng.IntN(len(steps))])
				case r < 7:
					op = model.OpRetry(model.Kind(rng.IntN(3)))
				default:
					op = model.OpSuccess(model.Kind(rng.IntN(3)))
				}
				var got bool
				switch op.Op {
				case model.Advance:
					clock.Advance(op.D)
				case model.Retry:
					got = b.Retry(budget.Kind(op.Kind))
				case model.Success:
					b.Success(budget.Kind(op.Kind))
				}
				var want bool
				s, want = tc.m.Step(s, op)
				if got != want {
					t.Fatalf("op %d %s: got %v, model %v (%s)", i, op, got, want, tc.m.DescribeState(s))
				}
				if a, w := b.Available(), float64(tc.m.Balance(s))/1000; a != w {
					t.Fatalf("op %d %s: Available() = %v, model %v", i, op, a, w)
				}
			}
		})
	}
}

// Each count of the in-flight budgets stops at 2^32 - 1, as the model's
// do: a Request at the cap counts nothing, and a Retry with the retries at
// the cap is denied even when the rule would admit it.
func TestInFlightCountsStopAtCap(t *testing.T) {
	t.Parallel()
	const top = inflightMax
	mu := NewMutexInFlight(1_000_000, top)
	mu.calls, mu.retries = top-1, top-1
	pk := NewPackedInFlight(100, top)
	pk.word.Store((top-1)<<32 | (top - 1))
	fs := NewFailsafeRuleInFlight(1_000_000, top)
	fs.state.Store(&flight{calls: top - 1, retries: top - 1})
	for name, b := range map[string]budget.InFlightBudget{"MutexInFlight": mu, "PackedInFlight": pk, "FailsafeRuleInFlight": fs} {
		b.Request()
		b.Request() // at the cap: counts nothing
		if !b.Retry(budget.Transient) {
			t.Errorf("%s: the retry that reaches the cap was denied", name)
		}
		if b.Retry(budget.Throttled) {
			t.Errorf("%s: a retry past the cap was granted", name)
		}
		b.CallEnd() // one call below the cap
		b.AttemptEnd(budget.Transient)
		if !b.Retry(budget.Transient) {
			t.Errorf("%s: a retry below the cap was denied", name)
		}
	}
	if mu.calls != top-1 || mu.retries != top {
		t.Errorf("MutexInFlight: calls=%d retries=%d, want %d, %d", mu.calls, mu.retries, top-1, top)
	}
	if r, c := unpack(pk.word.Load()); c != top-1 || r != top {
		t.Errorf("PackedInFlight: calls=%d retries=%d, want %d, %d", c, r, top-1, top)
	}
	if s := fs.state.Load(); s.calls != top-1 || s.retries != top {
		t.Errorf("FailsafeRuleInFlight: calls=%d retries=%d, want %d, %d", s.calls, s.retries, top-1, top)
	}
}

// skipUnderRace skips, under the race detector, a design where it can see
// nothing the suite does not see without it: one whose shared state sits
// behind a mutex or a channel, or is atomic throughout. The suite's verdict
// on it is the same without -race (go test ./..., which CI runs too), and
// the detector makes each run five to ten times slower. The design that
// publishes plain memory through an atomic pointer (SnapBucket) still runs
// under it.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if race.Enabled {
		t.Skip("a design on a mutex, a channel or atomics only: checked by go test ./... without -race")
	}
}

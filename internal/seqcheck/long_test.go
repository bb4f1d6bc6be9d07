package seqcheck_test

import (
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
)

// floatThrottle keeps gRFC A6's count in float64 tokens, as grpc-go does:
// a success adds 0.1, which no float64 holds exactly, so the count parts
// from the model's milli-tokens after a run of successes and retries
// held at the threshold.
type floatThrottle struct {
	tokens, max, ratio float64
}

func (t *floatThrottle) Request() {}
func (t *floatThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	t.tokens = max(t.tokens-1, 0)
	return t.tokens > t.max/2
}
func (t *floatThrottle) Success(budget.Kind) { t.tokens = min(t.tokens+t.ratio, t.max) }

var throttle = model.Throttle{Max: 10_000, Ratio: 100}

func subjectOf[S any](m model.Model[S], tm seqcheck.Timing, build func(budget.Clock) budget.Budget) seqcheck.Subject[S] {
	return seqcheck.Subject[S]{Model: m, New: build, Timing: tm}
}

// The float throttle answers as the model does for every short run, and
// a long run with stretches at the threshold finds where it parts.
func TestLongFindsFloatDrift(t *testing.T) {
	sub := subjectOf[model.ThrottleState](throttle, seqcheck.Timing{}, func(budget.Clock) budget.Budget {
		return &floatThrottle{tokens: 10, max: 10, ratio: 0.1}
	})
	found := 0
	for seed := range uint64(4) {
		d := seqcheck.Long(sub, seed, 100_000)
		if d == nil {
			continue
		}
		found++
		from := len(d.Ops)
		seqcheck.Shrink(sub, d, 2*time.Second)
		if len(d.Ops) > from {
			t.Fatalf("Shrink grew the run from %d to %d operations", from, len(d.Ops))
		}
		if _, bad := seqcheck.ReplayOps(sub, d.Ops); !bad {
			t.Fatalf("the shrunk run does not part from the model: %v", d)
		}
		t.Logf("seed %d: %v", seed, d)
	}
	if found < 4 {
		t.Fatalf("the float throttle parted from the model in %d of 4 long runs", found)
	}
}

// The reference budgets of every family follow their model through long
// runs.
func TestLongPassesReference(t *testing.T) {
	refill := model.TokenBucket{Capacity: 50_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 2_000}
	check := func(name string, d *seqcheck.Divergence) {
		if d != nil {
			t.Errorf("%s: %v", name, d)
		}
	}
	for seed := range uint64(2) {
		check("TokenBucket", seqcheck.Long(subjectOf[model.TokenBucketState](model.AWS(), seqcheck.TokenBucketTiming(model.AWS()), seqcheck.NewTokenBucket(model.AWS())), seed, 100_000))
		check("TokenBucket refilling", seqcheck.Long(subjectOf[model.TokenBucketState](refill, seqcheck.TokenBucketTiming(refill), seqcheck.NewTokenBucket(refill)), seed, 100_000))
		check("Ratio", seqcheck.Long(subjectOf[model.RatioState](model.SRE(), seqcheck.RatioTiming(model.SRE()), seqcheck.NewRatio(model.SRE())), seed, 100_000))
		check("Throttle", seqcheck.Long(subjectOf[model.ThrottleState](throttle, seqcheck.Timing{}, seqcheck.NewThrottle(throttle)), seed, 100_000))
		check("InFlight", seqcheck.Long(subjectOf[model.InFlightState](model.EnvoyDefaults(), seqcheck.Timing{}, seqcheck.NewInFlight(model.EnvoyDefaults())), seed, 100_000))
	}
}

var _ = strings.Contains
var _ = harness.IsStructured[model.ThrottleState]

package sim_test

import (
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/mutants"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/sim"
)

func small(newBudget func(budget.Clock) budget.Budget, p float64) sim.Config {
	return sim.Config{Clients: 20, Rate: 10, Healthy: 5 * time.Second, Outage: 30 * time.Second, Recovery: 10 * time.Second,
		ErrorRate: p, NewBudget: newBudget, Seed: 7}
}

func TestDeterministic(t *testing.T) {
	newBucket := func(c budget.Clock) budget.Budget {
		cfg := budget.DefaultTokenBucketConfig()
		b, _ := budget.NewTokenBucket(cfg)
		return b
	}
	a := sim.Run(t, small(newBucket, 0.7))
	b := sim.Run(t, small(newBucket, 0.7))
	if a.String() != b.String() {
		t.Fatalf("two runs differ:\n%v\n%v", a, b)
	}
	for i := range a.Seconds {
		if a.Seconds[i] != b.Seconds[i] {
			t.Fatalf("second %d differs: %+v and %+v", i, a.Seconds[i], b.Seconds[i])
		}
	}
	t.Log(a)
}

func TestNoBudgetMatchesOnePlusPPlusPSquared(t *testing.T) {
	for _, p := range []float64{0.3, 0.68, 1} {
		r := sim.Run(t, small(nil, p))
		want := 1 + p + p*p
		if d := r.Amplification/want - 1; d > 0.02 || d < -0.02 {
			t.Errorf("p=%v: amplification %.3f, want %.3f within 2%%", p, r.Amplification, want)
		}
		t.Logf("p=%v: %v (1+p+p² = %.3f)", p, r, want)
	}
}

// The published bounds: a 10% ratio stays at 1.1x plus the floor's share,
// floor / requests per client per window.
func TestRatioBound(t *testing.T) {
	newRatio := func(c budget.Clock) budget.Budget {
		cfg := budget.DefaultRatioConfig()
		cfg.Clock = c
		b, err := budget.NewRatio(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, rate := range []float64{10, 1} {
		c := small(newRatio, 1)
		c.Rate = rate
		r := sim.Run(t, c)
		perWindow := rate * 10 // requests per client in a 10s window
		floorShare := max(3/perWindow-0.1, 0)
		if bound := 1.1 + floorShare; r.Amplification > bound+1e-9 {
			t.Errorf("rate %v: amplification %.4f, above 1.1 + floor share %.2f", rate, r.Amplification, floorShare)
		}
		t.Logf("rate %v/s per client: %v (bound 1.1 + %.2f)", rate, r, floorShare)
	}
}

func TestAmplificationCheck(t *testing.T) {
	aws := model.AWS()
	newBucket := func(budget.Clock) budget.Budget {
		b, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
		return b
	}
	got, want, err := sim.CheckAmplification(t, newBucket, aws)
	if err != nil {
		t.Errorf("reference TokenBucket: %v", err)
	}
	t.Logf("reference TokenBucket: granted %d, model %d", got.Granted, want.Granted)
	for name, newB := range map[string]func(budget.Clock) budget.Budget{
		"PerCallSite":  func(c budget.Clock) budget.Budget { return mutants.NewPerCallSite(aws, c) },
		"RefundAlways": func(c budget.Clock) budget.Budget { return mutants.NewRefundAlways(aws, c) },
	} {
		_, _, err := sim.CheckAmplification(t, newB, aws)
		if err == nil {
			t.Errorf("the amplification check did not catch %s", name)
		}
		t.Logf("%s: %v", name, err)
	}
}

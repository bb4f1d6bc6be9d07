// Package simcases holds the outage scenarios and contenders that
// cmd/budgetsim runs, and its plot.
package simcases

import (
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/sim"
)

// A Contender is a budget the standard scenarios compare.
type Contender struct {
	Name      string
	NewBudget func(budget.Clock) budget.Budget // nil: no budget
}

// Contenders returns no budget and the four reference budgets with their
// anchors' defaults.
func Contenders() []Contender {
	return []Contender{
		{"no budget", nil},
		{"TokenBucket (AWS: 500, 14/5, +1)", func(budget.Clock) budget.Budget {
			b, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
			return b
		}},
		{"Ratio (SRE: 10%, 10s, floor 3)", func(c budget.Clock) budget.Budget {
			cfg := budget.DefaultRatioConfig()
			cfg.Clock = c
			b, _ := budget.NewRatio(cfg)
			return b
		}},
		{"Throttle (gRPC: 10, 0.1)", func(budget.Clock) budget.Budget {
			b, _ := budget.NewThrottle(10, 0.1)
			return b
		}},
		{"InFlight (Envoy: 20%, min 3)", func(budget.Clock) budget.Budget {
			b, _ := budget.NewInFlight(budget.DefaultInFlightConfig())
			return b
		}},
	}
}

// A Scenario is a named Config that budgetsim runs for every Contender.
type Scenario struct {
	Name   string
	Config sim.Config
}

// Scenarios returns the scenarios budgetsim runs, with the given seed: the
// standard one (50 clients × 10 req/s, 3 attempts, 20s healthy, 60s at 100%
// errors, 20s recovery), the outage of the article "Retry budget in TypeScript" as far as its text tells (the same at
// 68% errors, which gives its 2.12x without a budget), and low traffic,
// where the ratio's floor binds (1 req/s per client), and an outage of
// timeouts, the standard one with every attempt taking 1s: only then are
// calls in flight long enough for an in-flight budget to limit them (in
// the others its retries are never more than MinConcurrency at once).
func Scenarios(seed uint64) []Scenario {
	return []Scenario{
		{"standard: 50 clients × 10 req/s, 3 attempts; 20s healthy, 60s at 100% errors, 20s recovery",
			sim.Config{ErrorRate: 1, Seed: seed}},
		{`"Retry budget in TypeScript", as far as its text tells: the same at 68% errors`,
			sim.Config{ErrorRate: 0.68, Seed: seed}},
		{"low traffic, where the ratio's floor binds: 50 clients × 1 req/s, 100% errors",
			sim.Config{Rate: 1, ErrorRate: 1, Seed: seed, Outage: 60 * time.Second}},
		{"timeouts: the standard outage with every attempt taking 1s",
			sim.Config{ErrorRate: 1, Seed: seed, AttemptTime: time.Second}},
	}
}

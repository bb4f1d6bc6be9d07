package wild

import (
	"flag"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/model"
)

var catchRuns = flag.Int("catch.runs", 0, "how many runs of the suite TestCatchRates makes on every broken budget (0: the test is skipped)")

// mutantCases returns the budget mutants of internal/subjects/mutants as Cases, on
// the subjects the kill matrix gives them.
func mutantCases() []Case {
	var out []Case
	for _, m := range mutants.Budgets() {
		name := "mutants." + m.Name
		switch {
		case m.TokenBucket != nil:
			mm := plainModel
			var scale, horizon = seqcheck.TokenBucketTiming(mm).Scale, seqcheck.TokenBucketTiming(mm).Horizon
			if m.Refill == mutants.RequiresRefill {
				mm = refillModel
				tm := seqcheck.TokenBucketTiming(mm)
				scale, horizon = tm.Scale, tm.Horizon
			}
			out = append(out, mk("mutants", string(m.CaughtBy), budgettest.Subject[model.TokenBucketState]{Name: name, Model: mm, Scale: scale, Horizon: horizon,
				New: func(_ *testing.T, c budget.Clock) budget.Budget { return m.TokenBucket(mm, c) }}))
		case m.Ratio != nil:
			tm := seqcheck.RatioTiming(sreModel)
			out = append(out, mk("mutants", string(m.CaughtBy), budgettest.Subject[model.RatioState]{Name: name, Model: sreModel, Scale: tm.Scale, Horizon: tm.Horizon,
				New: func(_ *testing.T, c budget.Clock) budget.Budget { return m.Ratio(sreModel, c) }}))
		case m.InFlight != nil:
			envoy := model.EnvoyDefaults()
			out = append(out, mk("mutants", string(m.CaughtBy), budgettest.Subject[model.InFlightState]{Name: name, Model: envoy,
				New: func(_ *testing.T, c budget.Clock) budget.Budget { return m.InFlight(envoy, c) }}))
		default:
			out = append(out, mk("mutants", string(m.CaughtBy), budgettest.Subject[model.ThrottleState]{Name: name, Model: grpcModel,
				New: func(_ *testing.T, c budget.Clock) budget.Budget { return m.Throttle(grpcModel, c) }}))
		}
	}
	return out
}

// TestCatchRates measures, for every broken budget of internal/subjects/wild and
// internal/subjects/mutants, in how many of -catch.runs runs the suite fails it. A
// run is the checks of budgettest.Run in order, each a subtest, stopped at
// the first that fails: the verdict Run gives, since Run fails when any
// check does, and a data race that the race detector reports fails its
// subtest as it fails Run's. The test itself fails whenever a check does
// (that is how a caught run shows), so read the table it logs: it is a
// measurement, run by hand or by make catchrates.
func TestCatchRates(t *testing.T) {
	t.Parallel()
	if *catchRuns <= 0 {
		t.Skip("a measurement: run with -catch.runs=N")
	}
	type tally struct {
		caught int
		by     map[string]int
	}
	results := map[string]*tally{}
	var names []string
	for _, c := range append(Cases(), mutantCases()...) {
		tl := &tally{by: map[string]int{}}
		results[c.Name], names = tl, append(names, c.Name)
		for i := range *catchRuns {
			t.Run(fmt.Sprintf("%s/%d", c.Name, i+1), func(t *testing.T) {
				for _, ch := range budgettest.Checks() {
					if !t.Run(string(ch), func(t *testing.T) {
						if err := c.Check(t, ch); err != nil {
							first, _, _ := strings.Cut(err.Error(), "\n")
							t.Error(first)
						}
					}) {
						tl.caught++
						tl.by[string(ch)]++
						return
					}
				}
			})
		}
	}
	sort.Strings(names)
	var b strings.Builder
	all := 0
	for _, n := range names {
		r := results[n]
		if r.caught == *catchRuns {
			all++
		}
		fmt.Fprintf(&b, "  %-34s caught %2d/%d  first by %v\n", n, r.caught, *catchRuns, r.by)
	}
	t.Logf("caught in every run: %d of %d\n%s", all, len(names), b.String())
}

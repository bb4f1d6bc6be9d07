package wild

import (
	"encoding/json"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/yield"
)

var controlRuns = flag.Int("control.runs", 0, "how many runs, each with a fresh -budgettest.seed, TestControlledCatchRates makes of the Linearizable check on every concurrency bug (0: skipped; needs the code instrumented by cmd/budgetcheck)")

// concurrencyCases are the bugs that only an interleaving shows: the
// concurrency class of this package, and the mutants that are
// interleavings or lost updates.
func concurrencyCases() []Case {
	var out []Case
	for _, c := range append(Cases(), mutantCases()...) {
		if c.Class == ClassConcurrency || slices.Contains([]string{"wild.AddThenUndoBucket", "wild.LostRefundBucket", "mutants.CheckThenAct", "mutants.LostCredit", "mutants.MissingLock", "mutants.DoubleRefill"}, c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// TestControlledCatchRates measures, for every concurrency bug, in how
// many of -control.runs runs of the Linearizable check it is caught, each
// run from its own seed base, and the median time a catching run took;
// it fails if one escapes a run.
// Run it through the command, so that the budgets are instrumented:
//
//	go run ./cmd/budgetcheck -run TestControlledCatchRates -control.runs=100 ./internal/wild -instrument ./internal/mutants
func TestControlledCatchRates(t *testing.T) {
	if *controlRuns <= 0 {
		t.Skip("a measurement: run with -control.runs=N through cmd/budgetcheck")
	}
	if !yield.Instrumented() {
		t.Fatal("the code is not instrumented: run this test through cmd/budgetcheck")
	}
	seed := flag.Lookup("budgettest.seed")
	defer seed.Value.Set(seed.Value.String())
	var b strings.Builder
	all := 0
	cases := concurrencyCases()
	for _, c := range cases {
		caught := 0
		var took []time.Duration
		for i := range *controlRuns {
			seed.Value.Set(fmt.Sprint(i + 1))
			start := time.Now()
			t.Run(fmt.Sprintf("%s/%d", c.Name, i+1), func(t *testing.T) {
				if err := c.Check(t, budgettest.CheckLinearizable); err != nil {
					caught++
					took = append(took, time.Since(start))
				}
			})
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		median := time.Duration(0)
		if len(took) > 0 {
			median = took[len(took)/2]
		}
		if caught == *controlRuns {
			all++
		} else {
			t.Errorf("%s: caught in %d of %d runs under control", c.Name, caught, *controlRuns)
		}
		fmt.Fprintf(&b, "  %-28s caught %3d/%d  median %v\n", c.Name, caught, *controlRuns, median.Round(time.Millisecond))
	}
	t.Logf("caught in every run: %d of %d\n%s", all, len(cases), b.String())
}

var replayRE = regexp.MustCompile(`-budgettest\.replay='([^']*)'`)

// TestControlledReplay catches mutants.CheckThenAct under control, checks
// that it is minimized to at most four operations printed with their
// schedule, and replays the printed flag -control.runs times: every replay
// must fail the same way.
//
//	go run ./cmd/budgetcheck -run TestControlledReplay -control.runs=20 ./internal/wild -instrument ./internal/mutants
func TestControlledReplay(t *testing.T) {
	if *controlRuns <= 0 {
		t.Skip("a measurement: run with -control.runs=N through cmd/budgetcheck")
	}
	if !yield.Instrumented() {
		t.Fatal("the code is not instrumented: run this test through cmd/budgetcheck")
	}
	i := slices.IndexFunc(concurrencyCases(), func(c Case) bool { return c.Name == "mutants.CheckThenAct" })
	c := concurrencyCases()[i]
	err := c.Check(t, budgettest.CheckLinearizable)
	if err == nil {
		t.Fatal("CheckThenAct passed under control")
	}
	m := replayRE.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("no replay flag in:\n%v", err)
	}
	var s linearizability.Scenario
	if jerr := json.Unmarshal([]byte(m[1]), &s); jerr != nil || s.Control == nil || len(s.Control.Schedule) == 0 {
		t.Fatalf("the replay flag does not hold a scenario with its schedule (%v):\n%v", jerr, err)
	}
	if s.Len() > 4 {
		t.Errorf("minimized to %d operations, want at most 4:\n%v", s.Len(), err)
	}
	t.Logf("the failure:\n%v", err)
	replay := flag.Lookup("budgettest.replay")
	defer replay.Value.Set("")
	replay.Value.Set(m[1])
	failed := 0
	for range *controlRuns {
		if c.Check(t, budgettest.CheckLinearizable) != nil {
			failed++
		}
	}
	t.Logf("the replay failed in %d of %d runs", failed, *controlRuns)
	if failed != *controlRuns {
		t.Errorf("the replay failed in %d of %d runs, want every one", failed, *controlRuns)
	}
}

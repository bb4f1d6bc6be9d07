package wild

import (
	"encoding/json"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/sched"
	"github.com/retrybudget/retrybudget/linearizability"
)

var controlOnly = flag.String("control.only", "", "comma-separated names (wild.CheckThenActBucket, mutants.MissingLock, ...) of the concurrency bugs TestControlledCatchRates measures; empty: all")

var controlRuns = flag.Int("control.runs", 0, "how many runs, each with a fresh -budgettest.seed, TestControlledCatchRates makes of the Linearizable check on every concurrency bug (0: skipped; needs the code instrumented by cmd/budgetcheck)")

// concurrencyCases are the bugs that only an interleaving shows: the
// concurrency class of this package, and the mutants that are
// interleavings or lost updates.
func concurrencyCases() []Case {
	var out []Case
	for _, c := range append(Cases(), mutantCases()...) {
		if c.Class == ClassConcurrency || slices.Contains([]string{"wild.AddThenUndoBucket", "wild.LostRefundBucket", "mutants.CheckThenAct", "mutants.LostCredit", "mutants.MissingLock", "mutants.DoubleRefill", "mutants.InFlightCheckThenAct", "mutants.UnlockedCallEnd"}, c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// TestControlledCatchRates measures, for every concurrency bug, in how
// many of -control.runs runs of the Linearizable check it is caught, each
// run from its own seed base, and the median times a catching run took to
// find the violation and, with minimizing it, in all; it fails if one
// escapes a run.
// Run it through the command, so that the budgets are instrumented:
//
//	go run ./cmd/budgetcheck -run TestControlledCatchRates -control.runs=100 ./internal/subjects/wild -instrument ./internal/subjects/mutants
func TestControlledCatchRates(t *testing.T) {
	if *controlRuns <= 0 {
		t.Skip("a measurement: run with -control.runs=N through cmd/budgetcheck")
	}
	if !sched.Instrumented() {
		t.Fatal("the code is not instrumented: run this test through cmd/budgetcheck")
	}
	seed := flag.Lookup("budgettest.seed")
	defer seed.Value.Set(seed.Value.String())
	var b strings.Builder
	all := 0
	cases := concurrencyCases()
	if *controlOnly != "" {
		only := strings.Split(*controlOnly, ",")
		cases = slices.DeleteFunc(cases, func(c Case) bool { return !slices.Contains(only, c.Name) })
		if len(cases) == 0 {
			t.Fatalf("-control.only=%s names no concurrency bug", *controlOnly)
		}
	}
	for _, c := range cases {
		caught, controlledCatch := 0, 0
		var took, found []time.Duration
		for i := range *controlRuns {
			seed.Value.Set(fmt.Sprint(i + 1))
			start := time.Now()
			t.Run(fmt.Sprintf("%s/%d", c.Name, i+1), func(t *testing.T) {
				if err := c.Check(t, budgettest.CheckLinearizable); err != nil {
					caught++
					if strings.Contains(err.Error(), "under the controlled schedule") {
						controlledCatch++ // not by the free run each scenario also gets
					}
					d := time.Since(start)
					took = append(took, d)
					// The time to the violation, before minimizing it.
					if m := minimizedRE.FindStringSubmatch(err.Error()); m != nil {
						if spent, perr := time.ParseDuration(m[1]); perr == nil {
							found = append(found, d-spent)
						}
					}
				}
			})
		}
		median := func(ds []time.Duration) time.Duration {
			if len(ds) == 0 {
				return 0
			}
			slices.Sort(ds)
			return ds[len(ds)/2].Round(time.Millisecond)
		}
		if caught == *controlRuns {
			all++
		} else {
			t.Errorf("%s: caught in %d of %d runs under control", c.Name, caught, *controlRuns)
		}
		fmt.Fprintf(&b, "  %-28s caught %3d/%d (%d under a controlled schedule)  median %v to the violation, %v with minimizing\n",
			c.Name, caught, *controlRuns, controlledCatch, median(found), median(took))
	}
	t.Logf("caught in every run: %d of %d\n%s", all, len(cases), b.String())
}

var minimizedRE = regexp.MustCompile(`(?:minimized from \d+ to \d+ operations in|no smaller failing scenario was found in) (\S+):`)

var replayRE = regexp.MustCompile(`-budgettest\.replay='([^']*)'`)

// TestControlledReplay catches mutants.CheckThenAct under control, checks
// that it is minimized to at most four operations printed with their
// schedule, and replays the printed flag -control.runs times: every replay
// must fail the same way.
//
//	go run ./cmd/budgetcheck -run TestControlledReplay -control.runs=20 ./internal/subjects/wild -instrument ./internal/subjects/mutants
func TestControlledReplay(t *testing.T) {
	if *controlRuns <= 0 {
		t.Skip("a measurement: run with -control.runs=N through cmd/budgetcheck")
	}
	if !sched.Instrumented() {
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
	if operations(s) > 4 {
		t.Errorf("minimized to %d operations, want at most 4:\n%v", operations(s), err)
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

// operations counts what s runs: its prefix, its goroutines' lists and its
// clock steps.
func operations(s linearizability.Scenario) int {
	n := len(s.Before) + len(s.Clock)
	for _, g := range s.Goroutines {
		n += len(g)
	}
	return n
}

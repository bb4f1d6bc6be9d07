package mutants_test

import (
	"flag"
	"fmt"
	"testing"

	"github.com/retrybudget/retrybudget/internal/sched"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/stress"
)

var loopRuns = flag.Int("loop.runs", 0, "how many runs, each with a fresh -budgettest.seed, TestLoopCatchRates makes of the check that must catch each loop mutant that needs an interleaving (0: skipped)")

// TestLoopCatchRates measures how often the loop mutants whose bug needs
// an interleaving are caught by their check, each run with its own seed
// base: under plain go test the loop runs freely; through cmd/budgetcheck
// it runs under control. The correct hedging loop is measured beside them
// and must pass every run.
//
//	go test -run TestLoopCatchRates -loop.runs=100 -v ./internal/subjects/mutants
//	go run ./cmd/budgetcheck -run TestLoopCatchRates -loop.runs=100 -v ./internal/subjects/mutants
func TestLoopCatchRates(t *testing.T) {
	if *loopRuns <= 0 {
		t.Skip("a measurement: run with -loop.runs=N, plain and through cmd/budgetcheck")
	}
	seed := flag.Lookup("budgettest.seed")
	defer seed.Value.Set(seed.Value.String())
	rows := []mutants.LoopMutant{{Loop: mutants.CorrectHedgeLoop(), CaughtBy: "IgnoringOpEndsTheCall"}}
	for _, m := range mutants.Loops() {
		if m.Interleaving {
			rows = append(rows, m)
		}
	}
	mode := "free"
	if sched.Instrumented() {
		mode = "under control"
	}
	for _, m := range rows {
		caught, child := 0, false
		for i := range *loopRuns {
			// A subtest a run: the child process runs the check once, in
			// the subtest whose name it is given.
			t.Run(fmt.Sprintf("%s/%d", m.Loop.Name, i+1), func(t *testing.T) {
				seed.Value.Set(fmt.Sprint(i + 1))
				outcomes := stress.IsolatedLoopChecks(t, m.Loop, 0, m.CaughtBy)
				if outcomes == nil {
					child = true
					return
				}
				if r := outcomes[m.CaughtBy].Result; r == "fail" || r == "crash" {
					caught++
				}
			})
		}
		if child {
			continue
		}
		if m.Bug == "" { // the correct loop
			if caught > 0 {
				t.Errorf("%s failed %s in %d of %d runs", m.Loop.Name, m.CaughtBy, caught, *loopRuns)
			}
			t.Logf("%-22s passed %s %d/%d (%s)", m.Loop.Name, m.CaughtBy, *loopRuns-caught, *loopRuns, mode)
			continue
		}
		t.Logf("%-22s caught by %s %d/%d (%s)", m.Loop.Name, m.CaughtBy, caught, *loopRuns, mode)
	}
}

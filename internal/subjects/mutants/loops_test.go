package mutants_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/internal/matrix"
	"github.com/retrybudget/retrybudget/internal/race"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/stress"
	"github.com/retrybudget/retrybudget/yield"
)

// TestLoopKillMatrix runs every loop check, each in a child process, on the
// reference loop and on the correct loops the mutants are built from, and
// on every loop mutant the check that must catch it (every check with
// -matrix.full), and prints the matrix. The references must pass
// everything; each mutant must fail the check named for it.
func TestLoopKillMatrix(t *testing.T) {
	t.Parallel()
	if race.Enabled && !*full {
		// Each cell is a verdict of a loop check, none of which is the
		// race detector's: a mutant's bug is in what the loop does,
		// caught without -race. The loop checks themselves run under
		// -race in package stress (TestRetrierPassesLoopChecks and the
		// rest).
		t.Skip("every cell is a loop check's verdict, which the race detector does not change: go test ./... checks them")
	}
	type row struct {
		loop     stress.Loop
		caughtBy string
		premise  bool
	}
	rows := []row{{mutants.CorrectLoop(), "", false}, {mutants.CorrectHedgeLoop(), "", false}}
	if *full || yield.Instrumented() {
		// budget.Retrier passes every loop check in stress's
		// TestRetrierPassesIsolatedLoopChecks, which go test ./... runs
		// too: its row here runs in the full matrix and under
		// cmd/budgetcheck.
		rows = append([]row{{stress.RetrierLoop(), "", false}}, rows...)
	}
	for _, m := range mutants.Loops() {
		rows = append(rows, row{m.Loop, m.CaughtBy, m.Premise})
	}
	checks := stress.LoopChecks()
	results := map[string]map[string]stress.Outcome{}
	for _, r := range rows {
		var outcomes map[string]stress.Outcome
		if r.caughtBy == "" || *full {
			outcomes = stress.IsolatedLoopChecks(t, r.loop, 0)
		} else {
			// A mutant's other cells are the full matrix's (make
			// killmatrix): by default only the check that must catch it.
			outcomes = stress.IsolatedLoopChecks(t, r.loop, 0, r.caughtBy)
		}
		if outcomes == nil {
			continue // the child: its check has run
		}
		results[r.loop.Name] = outcomes
		for _, c := range checks {
			o := outcomes[c.Name]
			switch {
			case r.caughtBy == "" && o.Result == "skip" && r.loop.Skip[c.Name] != "":
			case r.caughtBy == "" && o.Result != "pass":
				t.Errorf("%s failed %s (%s):\n%s", r.loop.Name, c.Name, o.Result, o.Output)
			case r.caughtBy == c.Name && o.Result != "fail" && o.Result != "crash":
				t.Errorf("%s escaped %s (%s), the check that must catch it", r.loop.Name, c.Name, o.Result)
			case r.caughtBy == c.Name && r.premise != strings.Contains(o.Output, "premise not reached:"):
				t.Errorf("%s failed %s, but premise not reached is %v, want %v:\n%s", r.loop.Name, c.Name, !r.premise, r.premise, o.Output)
			case r.caughtBy == c.Name:
				t.Logf("%s caught by %s:\n%s", r.loop.Name, c.Name, indent(o.Output))
			}
		}
	}
	if len(results) == 0 {
		return
	}
	for _, r := range rows {
		for _, c := range checks {
			o, ran := results[r.loop.Name][c.Name]
			if !ran {
				continue
			}
			verdict := o.Result
			if r.caughtBy != "" && (verdict == "fail" || verdict == "crash") {
				verdict = "caught"
			} else if r.caughtBy == "" && verdict == "fail" {
				verdict = "fail"
			}
			detail := ""
			if c.Name == r.caughtBy || (r.caughtBy == "" && o.Result != "pass") {
				detail = firstLines(o.Output, 12)
			}
			t.Log(matrix.Cell{Matrix: matrix.Loops, Impl: r.loop.Name, Check: c.Name, Verdict: verdict, Must: c.Name == r.caughtBy,
				Mutant: r.caughtBy != "", Runs: 1, Seconds: o.Elapsed.Seconds(), Detail: detail}.Line())
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "loop kill matrix (p pass, F fail, C crash, s skip, . not run without -matrix.full; * the check that must catch the row)\n%-22s", "loop")
	for i := range checks {
		fmt.Fprintf(&b, " %3d", i+1)
	}
	b.WriteByte('\n')
	for _, r := range rows {
		fmt.Fprintf(&b, "%-22s", r.loop.Name)
		for _, c := range checks {
			mark := map[string]string{"pass": "p", "fail": "F", "crash": "C", "skip": "s", "": "."}[results[r.loop.Name][c.Name].Result]
			if c.Name == r.caughtBy {
				mark += "*"
			}
			fmt.Fprintf(&b, " %3s", mark)
		}
		b.WriteByte('\n')
	}
	for i, c := range checks {
		fmt.Fprintf(&b, "%3d %s: %s\n", i+1, c.Name, c.Rule)
	}
	t.Log("\n" + b.String())
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 8 {
		lines = append(lines[:8], "...")
	}
	return "    " + strings.Join(lines, "\n    ")
}

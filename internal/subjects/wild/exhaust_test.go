package wild

import (
	"flag"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/sched"
)

var exhaustTable = flag.Bool("exhaust.table", false, "TestExhaustiveTable: check that the Linearizable check's exhaustive stage finds every concurrency bug, and print the schedules each needed (needs the code instrumented by cmd/budgetcheck)")

// exhaustRE reads what found a violation, when the exhaustive stage did.
var exhaustRE = regexp.MustCompile(`found by the exhaustive stage \(every schedule with at most (\d+) preemptions(?: inside calls)?\), scenario "([^"]*)": (\d+) schedules`)

// TestExhaustiveTable runs the Linearizable check once on every
// concurrency bug, whose exhaustive stage runs first under control, fails
// for a bug that stage does not find within its bound of preemptions, and
// prints a table of the scenario and the schedules each needed.
//
//	go run ./cmd/budgetcheck -run TestExhaustiveTable -exhaust.table ./internal/subjects/wild -instrument ./internal/subjects/mutants
func TestExhaustiveTable(t *testing.T) {
	t.Parallel()
	if !*exhaustTable {
		t.Skip("a measurement: run with -exhaust.table through cmd/budgetcheck")
	}
	if !sched.Instrumented() {
		t.Fatal("the code is not instrumented: run this test through cmd/budgetcheck")
	}
	var b strings.Builder
	b.WriteString("| bug | scenario of the exhaustive stage | schedules to the violation |\n|---|---|---|\n")
	found := 0
	cases := concurrencyCases()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			err := c.Check(t, budgettest.CheckLinearizable)
			if err == nil {
				t.Errorf("%s: the Linearizable check passed", c.Name)
				fmt.Fprintf(&b, "| %s | not found | |\n", c.Name)
				return
			}
			m := exhaustRE.FindStringSubmatch(err.Error())
			if m == nil {
				t.Errorf("%s: caught, but not by the exhaustive stage:\n%v", c.Name, err)
				fmt.Fprintf(&b, "| %s | not found by it (caught by the random schedules) | |\n", c.Name)
				return
			}
			found++
			fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Name, m[2], m[3])
		})
	}
	t.Logf("the exhaustive stage found %d of %d concurrency bugs:\n%s", found, len(cases), b.String())
}

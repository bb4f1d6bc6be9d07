package mutants_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/matrix"
	"github.com/retrybudget/retrybudget/internal/race"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/yield"
)

var (
	catchRuns = flag.Int("catch.runs", 1, "times each mutant is caught by the check that must catch it (cmd/budgetcheck: 3)")
	refReps   = flag.Int("ref.reps", 1, "times every check runs on every reference budget (cmd/budgetcheck: 20)")
	// The cells of a mutant other than the one its check must catch fail
	// nothing (a second check catching it is a bonus, not a promise); they
	// fill in the matrix that cmd/budgetcheck renders and take two thirds
	// of the package's time, so go test ./... skips them.
	full = flag.Bool("matrix.full", false, "run every check on every mutant, not only the one that must catch it (make killmatrix, cmd/budgetcheck)")
	// cmd/budgetcheck -matrix runs the Race column under -race and the
	// others without it, at once: the race detector changes no other
	// verdict, and makes each run five to ten times slower.
	only = flag.String("matrix.only", "", "run only the column of this check (cmd/budgetcheck -matrix: Race, under -race)")
	skip = flag.String("matrix.skip", "", "leave out the column of this check (cmd/budgetcheck -matrix: Race, without -race)")
)

// The subjects a team would write for each family: one configuration per
// family, the same for the reference budget and for every mutant of it.
var (
	bucket       = model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	refillBucket = model.TokenBucket{Capacity: 30_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 10_000}
	window       = model.SRE()
	throttle     = model.Throttle{Max: 10_000, Ratio: 100}
	envoy        = model.EnvoyDefaults()
)

// A row of the kill matrix: one implementation put through the suite.
type row struct {
	name string
	must budgettest.Check // "" for a reference, which must pass everything
	racy bool             // has data races: every check runs in a child process
	// interleaving: its bug needs calls interleaved inside a method; the
	// controlled stage of its check finds it on every run.
	interleaving bool
	// verify runs one check of the suite on the row's subject.
	verify func(t *testing.T, c budgettest.Check) error
}

func subjectRow[S any](name string, must budgettest.Check, sub budgettest.Subject[S]) row {
	sub.Name = name
	return row{name: name, must: must, racy: must == mutants.Race,
		verify: func(t *testing.T, c budgettest.Check) error { return budgettest.VerifyCheck(t, sub, c) }}
}

func bucketRow(name string, must budgettest.Check, refill mutants.Refill, newB func(model.TokenBucket, budget.Clock) budget.Budget) row {
	m := bucket
	var tm harness.Timing
	if refill == mutants.RequiresRefill {
		m = refillBucket
		tm = seqcheck.TokenBucketTiming(m)
	}
	return subjectRow(name, must, budgettest.Subject[model.TokenBucketState]{Model: m, Scale: tm.Scale, Horizon: tm.Horizon,
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return newB(m, c) }})
}

func ratioRow(name string, must budgettest.Check, newB func(model.Ratio, budget.Clock) budget.Budget) row {
	tm := seqcheck.RatioTiming(window)
	return subjectRow(name, must, budgettest.Subject[model.RatioState]{Model: window, Scale: tm.Scale, Horizon: tm.Horizon,
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return newB(window, c) }})
}

func throttleRow(name string, must budgettest.Check, newB func(model.Throttle, budget.Clock) budget.Budget) row {
	return subjectRow(name, must, budgettest.Subject[model.ThrottleState]{Model: throttle,
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return newB(throttle, c) }})
}

func inFlightRow(name string, must budgettest.Check, newB func(model.InFlight, budget.Clock) budget.Budget) row {
	return subjectRow(name, must, budgettest.Subject[model.InFlightState]{Model: envoy,
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return newB(envoy, c) }})
}

// newInFlight builds the reference in-flight budget with m's parameters
// (and Envoy's rule, the only one it has).
func newInFlight(m model.InFlight, _ budget.Clock) budget.Budget {
	b, err := budget.NewInFlight(budget.InFlightConfig{Ratio: float64(m.PPM) / 1e6, MinConcurrency: int(m.MinConcurrency)})
	if err != nil {
		panic(err)
	}
	return b
}

func rows() []row {
	rs := []row{
		bucketRow("budget.TokenBucket", "", mutants.NoRefill, func(m model.TokenBucket, c budget.Clock) budget.Budget { return seqcheck.NewTokenBucket(m)(c) }),
		bucketRow("budget.TokenBucket+refill", "", mutants.RequiresRefill, func(m model.TokenBucket, c budget.Clock) budget.Budget { return seqcheck.NewTokenBucket(m)(c) }),
		ratioRow("budget.Ratio", "", func(m model.Ratio, c budget.Clock) budget.Budget { return seqcheck.NewRatio(m)(c) }),
		throttleRow("budget.Throttle", "", func(m model.Throttle, c budget.Clock) budget.Budget { return seqcheck.NewThrottle(m)(c) }),
		inFlightRow("budget.InFlight", "", newInFlight),
	}
	for _, m := range mutants.Budgets() {
		var r row
		switch {
		case m.TokenBucket != nil:
			r = bucketRow(m.Name, budgettest.Check(m.CaughtBy), m.Refill, m.TokenBucket)
		case m.Ratio != nil:
			r = ratioRow(m.Name, budgettest.Check(m.CaughtBy), m.Ratio)
		case m.Throttle != nil:
			r = throttleRow(m.Name, budgettest.Check(m.CaughtBy), m.Throttle)
		case m.InFlight != nil:
			r = inFlightRow(m.Name, budgettest.Check(m.CaughtBy), m.InFlight)
		default:
			panic("mutant " + m.Name + " has no constructor")
		}
		r.interleaving = m.Interleaving
		rs = append(rs, r)
	}
	return rs
}

// childEnv names the row and check a child process runs, as "row|check".
const childEnv = "RETRYBUDGET_KILLMATRIX_CHILD"

// TestRacyChild runs in a child process only: one check of the suite on a
// racy row, so that the race detector can fail it without failing the
// parent.
func TestRacyChild(t *testing.T) {
	t.Parallel()
	name, check, ok := strings.Cut(os.Getenv(childEnv), "|")
	if !ok {
		t.Skip("runs only as a child of TestKillMatrix")
	}
	for _, r := range rows() {
		if r.name == name {
			if err := r.verify(t, budgettest.Check(check)); err != nil {
				t.Error(err)
			}
			return
		}
	}
	t.Fatalf("no row %q", name)
}

// runOnce runs one check on one row and says what happened: "caught" or
// "pass" (or "fail" for a reference), "skip" when the check cannot see the
// row's bug in this build, "error" when the child process died.
func runOnce(t *testing.T, r row, c budgettest.Check) (verdict, detail string) {
	if !r.racy {
		if err := r.verify(t, c); err != nil {
			return "caught", err.Error()
		}
		return "pass", ""
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRacyChild$", "-test.v", "-test.count=1")
	cmd.Env = append(harness.ChildEnv(), childEnv+"="+r.name+"|"+string(c))
	out, err := cmd.CombinedOutput()
	text := string(out)
	switch {
	case strings.Contains(text, "WARNING: DATA RACE"):
		return "caught", "the race detector reported a data race:\n" + firstLines(text[strings.Index(text, "WARNING: DATA RACE"):], 12)
	case err != nil && strings.Contains(text, "broken rule:"):
		return "caught", firstLines(text[strings.Index(text, "broken rule:"):], 12)
	case err != nil:
		return "error", firstLines(text, 30)
	case c == mutants.Race && !race.Enabled:
		return "skip", "built without -race: the Race check sees data races only under the race detector (budgetcheck -race)"
	}
	return "pass", ""
}

func TestKillMatrix(t *testing.T) {
	t.Parallel()
	rs := rows()
	checks := budgettest.Checks()
	var cells []matrix.Cell
	for _, r := range rs {
		for _, c := range checks {
			cell := matrix.Cell{Matrix: matrix.Budgets, Impl: r.name, Check: string(c), Must: c == r.must, Mutant: r.must != ""}
			if *only != "" && string(c) != *only || string(c) == *skip {
				continue
			}
			if race.Enabled && !*full && c != mutants.Race {
				// Under the race detector only the Race check's column,
				// the one it changes: every other verdict is the same
				// without -race (go test ./..., which CI runs too), and
				// the detector makes each run five to ten times slower.
				// The full matrix (cmd/budgetcheck -matrix) runs them all.
				continue
			}
			reps := 1
			switch {
			case !cell.Mutant && !*full && !yield.Instrumented():
				// The references pass the whole suite in budgettest's
				// TestReferenceBudgetsConform, which go test ./... runs
				// too; their rows here, under these configurations, run
				// under cmd/budgetcheck (CI runs this test so) and in the
				// full matrix. Run again here they were two thirds of the
				// package's time.
				continue
			case !cell.Mutant:
				reps = *refReps
			case cell.Must:
				reps = *catchRuns
			case !*full:
				continue
			}
			// A subtest per cell: the controlled stage of a check runs in
			// a child process that runs this cell's subtest only.
			t.Run(r.name+"/"+string(c), func(t *testing.T) {
				var times []time.Duration
				for rep := range reps {
					start := time.Now()
					verdict, detail := runOnce(t, r, c)
					times = append(times, time.Since(start))
					cell.Runs, cell.Verdict = rep+1, verdict
					if !cell.Mutant && verdict == "caught" {
						cell.Verdict = "fail"
					}
					if cell.Must || cell.Verdict == "fail" || verdict == "error" {
						cell.Detail = firstLines(detail, 16)
					}
					if cell.Must && strings.Contains(detail, "rendering: ") {
						cell.Artifact = strings.TrimSpace(strings.SplitN(detail[strings.Index(detail, "rendering: ")+len("rendering: "):], "\n", 2)[0])
					}
					// A reference must pass every time; a mutant must be
					// caught every time by its check.
					if (cell.Mutant && cell.Must && verdict != "caught") || (!cell.Mutant && cell.Verdict != "pass" && verdict != "skip") {
						break
					}
				}
				cell.Seconds = median(times).Seconds()
				if p := cell.Problem(); p != "" && cell.Verdict != "skip" {
					t.Errorf("%s", p)
				}
				t.Log(cell.Line())
			})
			if cell.Verdict != "" {
				cells = append(cells, cell)
			}
		}
	}
	t.Log("\n" + table(cells, checks))
}

// table formats the budget matrix; a cell not run (see -matrix.full) shows
// as "-".
func table(cells []matrix.Cell, checks []budgettest.Check) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kill matrix through budgettest (* the check that must catch the row; references repeated %d times, mutants caught %d times)\n%-26s", *refReps, *catchRuns, "implementation")
	for _, c := range checks {
		fmt.Fprintf(&b, " %-13s", c)
	}
	var impls []string
	verdicts := map[[2]string]string{}
	for _, c := range cells {
		if !slices.Contains(impls, c.Impl) {
			impls = append(impls, c.Impl)
		}
		s := c.Verdict
		if c.Must {
			s += "*"
		}
		verdicts[[2]string{c.Impl, c.Check}] = s
	}
	for _, impl := range impls {
		fmt.Fprintf(&b, "\n%-26s", impl)
		for _, c := range checks {
			s, ok := verdicts[[2]string{impl, string(c)}]
			if !ok {
				s = "-"
			}
			fmt.Fprintf(&b, " %-13s", s)
		}
	}
	return b.String() + "\n"
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// firstLines returns at most n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}

// Every mutant names, as the check that must catch it, a check the suite
// has: the names are spelt in package mutants, which does not import the
// suite.
func TestCaughtByNamesACheck(t *testing.T) {
	t.Parallel()
	for _, m := range mutants.Budgets() {
		if !slices.Contains(budgettest.Checks(), budgettest.Check(m.CaughtBy)) {
			t.Errorf("%s: CaughtBy %q is none of budgettest.Checks() %q", m.Name, m.CaughtBy, budgettest.Checks())
		}
	}
}

package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/matrix"
)

type event struct {
	Action string `json:"Action"`
	Test   string `json:"Test"`
	Output string `json:"Output"`
}

// matrixMain is budgetcheck -matrix: the kill matrices of the module's own
// mutants, from a checkout of this module.
func matrixMain(argv []string) {
	fs := flag.NewFlagSet("budgetcheck -matrix", flag.ExitOnError)
	race := fs.Bool("race", true, "run the Race column, which needs the race detector, in a go test -race of its own beside the others (-race=false: that column is skipped)")
	htmlDir := fs.String("html", "", "write the HTML rendering of every linearizability violation under `dir`")
	jsonOut := fs.Bool("json", false, "print the results as JSON instead of tables")
	catchRuns := fs.Int("catch.runs", 3, "times each mutant must be caught by its check")
	refReps := fs.Int("ref.reps", 20, "repetitions of every check on every reference budget")
	fs.Parse(argv)

	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "budgetcheck:", err)
		os.Exit(2)
	}
	var common []string
	if *htmlDir != "" {
		dir, err := filepath.Abs(*htmlDir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "budgetcheck:", err)
			os.Exit(2)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "budgetcheck:", err)
			os.Exit(2)
		}
		common = append(common, "-artifacts", "-outputdir", dir)
	}
	common = append(common, "-timeout", "60m", "./internal/subjects/mutants")
	flags := []string{fmt.Sprintf("-catch.runs=%d", *catchRuns), fmt.Sprintf("-ref.reps=%d", *refReps), "-matrix.full"}
	// Every column but Race without the race detector, which changes no
	// other verdict and makes each run five to ten times slower; with
	// -race, the Race column in a second go test, under it, at once.
	runs := []matrixRun{{race: false, args: slices.Concat([]string{"test", "-json", "-count=1"}, common,
		[]string{"-run", "^(TestKillMatrix|TestLoopKillMatrix)$"}, flags)}}
	if *race {
		runs[0].args = append(runs[0].args, "-matrix.skip="+string(budgettest.CheckRace))
		runs = append(runs, matrixRun{race: true, args: slices.Concat([]string{"test", "-json", "-count=1", "-race"}, common,
			[]string{"-run", "^TestKillMatrix$"}, flags, []string{"-matrix.only=" + string(budgettest.CheckRace)})})
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range runs {
		r := &runs[i]
		fmt.Fprintf(os.Stderr, "budgetcheck: go %s\n", strings.Join(r.args, " "))
		cmd := exec.Command("go", r.args...)
		cmd.Dir = root
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			fmt.Fprintln(os.Stderr, "budgetcheck:", err)
			os.Exit(2)
		}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "budgetcheck:", err)
			os.Exit(2)
		}
		wg.Go(func() {
			r.cells, r.failures, r.raw = read(stdout, start, r.race)
			r.err = cmd.Wait()
		})
	}
	wg.Wait()
	var cells []matrix.Cell
	var failures []string
	var raw string
	var runErr error
	for _, r := range runs {
		cells = append(cells, r.cells...)
		failures = append(failures, r.failures...)
		raw += r.raw
		runErr = errors.Join(runErr, r.err)
	}
	slices.SortStableFunc(cells, func(a, b matrix.Cell) int { return cmpCells(runs[0].cells, a, b) })

	if *jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(struct {
			Cells   []matrix.Cell `json:"cells"`
			Failed  bool          `json:"failed"`
			Seconds float64       `json:"seconds"`
		}{cells, runErr != nil || len(failures) > 0, time.Since(start).Seconds()})
	} else {
		printMatrix(os.Stdout, matrix.Budgets, cells, *htmlDir != "")
		printMatrix(os.Stdout, matrix.Loops, cells, *htmlDir != "")
		fmt.Printf("\n%d cells in %v\n", len(cells), time.Since(start).Round(time.Second))
	}
	if len(cells) == 0 {
		fmt.Fprintf(os.Stderr, "budgetcheck: the harness reported nothing; its output:\n%s", raw)
		os.Exit(2)
	}
	for _, f := range failures {
		fmt.Fprintln(os.Stderr, "budgetcheck: FAIL:", f)
	}
	if runErr != nil || len(failures) > 0 {
		if len(failures) == 0 {
			fmt.Fprintf(os.Stderr, "budgetcheck: the harness failed (%v); its output:\n%s", runErr, raw)
		}
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "budgetcheck: every reference implementation passes, and every mutant is caught")
}

// A matrixRun is one go test of the kill matrices.
type matrixRun struct {
	race     bool
	args     []string
	cells    []matrix.Cell
	failures []string
	raw      string
	err      error
}

// cmpCells orders cells by row, as the run without -race met the rows,
// and within a row by check, in the suite's order: the Race column's
// cells come from the other run.
func cmpCells(order []matrix.Cell, a, b matrix.Cell) int {
	row := func(c matrix.Cell) int {
		return slices.IndexFunc(order, func(o matrix.Cell) bool { return o.Matrix == c.Matrix && o.Impl == c.Impl })
	}
	col := func(c matrix.Cell) int { return slices.Index(budgettest.Checks(), budgettest.Check(c.Check)) }
	return cmp.Or(cmp.Compare(row(a), row(b)), cmp.Compare(col(a), col(b)))
}

// read collects the cells from go test -json output, reporting progress on
// stderr, and returns them with the failures they show and the tests'
// plain output (for when something else went wrong).
func read(r io.Reader, start time.Time, race bool) (cells []matrix.Cell, failures []string, raw string) {
	var out bytes.Buffer
	partial := map[string]string{} // test2json splits long lines; join them per test
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		switch e.Action {
		case "output":
			out.WriteString(e.Output)
			text := partial[e.Test] + e.Output
			if !strings.HasSuffix(text, "\n") {
				partial[e.Test] = text
				continue
			}
			delete(partial, e.Test)
			line := strings.TrimSpace(text)
			if c, ok := matrix.Parse(line); ok {
				cells = append(cells, c)
				fmt.Fprintf(os.Stderr, "  %6.1fs  %-7s %-26s %-28s %s\n", time.Since(start).Seconds(), c.Matrix, c.Impl, c.Check, c.Verdict)
				if f := judge(c, race); f != "" {
					failures = append(failures, f)
				}
			}
		case "run":
			if e.Test != "" && !strings.Contains(e.Test, "/") {
				fmt.Fprintf(os.Stderr, "  %6.1fs  running %s\n", time.Since(start).Seconds(), e.Test)
			}
		}
	}
	return cells, failures, out.String()
}

// judge says what is wrong with a cell, or "". Without -race a racy
// mutant's Race cell is a skip, not an escape: only the race detector sees
// that bug.
func judge(c matrix.Cell, race bool) string {
	if c.Must && c.Verdict == "skip" && !race {
		return ""
	}
	return c.Problem()
}

func printMatrix(w io.Writer, name string, cells []matrix.Cell, renderings bool) {
	var impls, checks []string
	seenImpl, seenCheck := map[string]bool{}, map[string]bool{}
	at := map[[2]string]matrix.Cell{}
	for _, c := range cells {
		if c.Matrix != name {
			continue
		}
		if !seenImpl[c.Impl] {
			seenImpl[c.Impl] = true
			impls = append(impls, c.Impl)
		}
		if !seenCheck[c.Check] {
			seenCheck[c.Check] = true
			checks = append(checks, c.Check)
		}
		at[[2]string{c.Impl, c.Check}] = c
	}
	if len(impls) == 0 {
		return
	}
	width := 14
	if name == matrix.Loops {
		width = 12
	}
	how := "every cell a budgettest.VerifyCheck"
	if name == matrix.Loops {
		how = "every cell a loop check of budgettest.RunLoop, in a child process"
	}
	fmt.Fprintf(w, "\n%s kill matrix, %s (* = the check that must catch the row)\n%-26s", name, how, "implementation")
	for i, c := range checks {
		if name == matrix.Loops {
			c = fmt.Sprintf("%d", i+1)
		}
		fmt.Fprintf(w, " %-*s", width, c)
	}
	fmt.Fprintln(w)
	for _, impl := range impls {
		fmt.Fprintf(w, "%-26s", impl)
		for _, ch := range checks {
			c, ok := at[[2]string{impl, ch}]
			s := "-"
			if ok {
				s = fmt.Sprintf("%s %s", c.Verdict, fmtSeconds(c.Seconds))
				if c.Must {
					s += "*"
				}
			}
			fmt.Fprintf(w, " %-*s", width, s)
		}
		fmt.Fprintln(w)
	}
	if name == matrix.Loops {
		for i, c := range checks {
			fmt.Fprintf(w, "  %d = %s\n", i+1, c)
		}
	}
	for _, impl := range impls {
		for _, ch := range checks {
			if c := at[[2]string{impl, ch}]; renderings && c.Artifact != "" {
				fmt.Fprintf(w, "  rendering of %s (%s): %s\n", impl, ch, c.Artifact)
			}
		}
	}
}

func fmtSeconds(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.0fms", s*1000)
	}
	return fmt.Sprintf("%.1fs", s)
}

// moduleRoot returns the directory of this module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("run budgetcheck inside a checkout of github.com/retrybudget/retrybudget")
	}
	data, err := os.ReadFile(mod)
	if err != nil || !bytes.Contains(data, []byte("module github.com/retrybudget/retrybudget\n")) {
		return "", fmt.Errorf("%s is not github.com/retrybudget/retrybudget's go.mod; run budgetcheck inside a checkout of it", mod)
	}
	return filepath.Dir(mod), nil
}

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var routes = flag.String("routes", "", "comma-separated modules under testdata (unseen,classes) whose tests run both ways, plain go test and budgetcheck, and must give the same cells (make routes)")

// failures lists the tests that failed, by name.
func failures(cells map[string]cell) []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(cells)) {
		if cells[n].result == "fail" {
			out = append(out, n)
		}
	}
	return out
}

// TestRoutesGiveTheSameCells runs the tests of each module -routes names
// twice, with plain go test (the controlled stages in instrumented child
// processes) and with budgetcheck (the rewritten code in the test
// process), and asks for the same cells both ways: every subtest passes,
// fails or skips alike, and a broken budget is caught, or escapes, alike.
// Both routes must pass: the modules' tests are gates (a broken budget
// must be caught, a correct one pass), and CI runs them this way only.
// The modules log "CAUGHT: <check>: broken rule: ..." for each check that
// caught a broken budget. A budget caught by other checks on one route
// than on the other is logged, not failed: the free runs of budgetcheck
// are made on the rewritten code, whose yield points change how often a
// free stress run meets a race, so a check that catches a budget only in
// its free runs may catch it on some runs of one route and not the other.
func TestRoutesGiveTheSameCells(t *testing.T) {
	if *routes == "" {
		t.Skip("-routes names no module (make routes runs this test)")
	}
	for mod := range strings.SplitSeq(*routes, ",") {
		t.Run(mod, func(t *testing.T) {
			dir := filepath.Join("..", "..", "testdata", mod)
			plain := cellsOf(t, dir, "go", "test", "-count=1", "-json", "./...")
			tool := cellsOf(t, dir, "go", "run", "github.com/retrybudget/retrybudget/cmd/budgetcheck", "-count=1", "-json", "./...")
			diff, checks := compareCells(plain, tool)
			if checks != "" {
				t.Logf("%s: the same verdicts, but caught by other checks (plain go test, then budgetcheck):\n%s", mod, checks)
			}
			for _, route := range []struct {
				name  string
				cells map[string]cell
			}{{"plain go test", plain}, {"budgetcheck", tool}} {
				if failed := failures(route.cells); len(failed) > 0 {
					t.Errorf("%s: on %s, %d tests failed: %s", mod, route.name, len(failed), strings.Join(failed, ", "))
				}
			}
			if diff != "" {
				t.Errorf("%s: the two routes differ (plain go test, then budgetcheck):\n%s", mod, diff)
				return
			}
			t.Logf("%s: %d cells, the same verdict both ways", mod, len(plain))
		})
	}
}

// A cell is what one test gave: its result and, for a broken budget, the
// checks that caught it.
type cell struct {
	result string
	caught []string
}

func (c cell) String() string {
	if len(c.caught) == 0 {
		return c.result
	}
	return c.result + " (caught by " + strings.Join(c.caught, ", ") + ")"
}

// cellsOf runs the command in dir and reads its test2json events into
// cells, by test name.
func cellsOf(t *testing.T, dir string, name string, args ...string) map[string]cell {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output() // a failing test exits 1: its events say which
	cells, perr := parseCells(out)
	if perr != nil || len(cells) == 0 {
		t.Fatalf("%s %s in %s: %v, %v\n%s", name, strings.Join(args, " "), dir, err, perr, stderr.String())
	}
	return cells
}

// parseCells reads test2json events.
func parseCells(out []byte) (map[string]cell, error) {
	cells := map[string]cell{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue // what budgetcheck prints of itself
		}
		var e struct{ Action, Package, Test, Output string }
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("an event: %v: %s", err, line)
		}
		if e.Test == "" {
			continue
		}
		key := e.Package + " " + e.Test
		c := cells[key]
		switch e.Action {
		case "pass", "fail", "skip":
			c.result = e.Action
		case "output":
			if m := caughtBy.FindStringSubmatch(e.Output); m != nil {
				if check := m[1]; !slices.Contains(c.caught, check) {
					c.caught = append(c.caught, check)
					slices.Sort(c.caught)
				}
			}
		}
		cells[key] = c
	}
	return cells, sc.Err()
}

// caughtBy matches the line a module logs for a check that caught a
// broken budget.
var caughtBy = regexp.MustCompile(`CAUGHT: (\w+): broken rule: `)

// compareCells lists the tests whose verdicts differ, one a line, and then
// those caught by other checks.
func compareCells(a, b map[string]cell) (diff, checks string) {
	names := slices.Sorted(maps.Keys(a))
	for n := range b {
		if _, ok := a[n]; !ok {
			names = append(names, n)
		}
	}
	var d, c strings.Builder
	for _, n := range names {
		ca, cb := a[n], b[n]
		switch {
		case ca.result != cb.result || (len(ca.caught) > 0) != (len(cb.caught) > 0):
			fmt.Fprintf(&d, "  %s: %s, then %s\n", n, orNone(ca), orNone(cb))
		case ca.String() != cb.String():
			fmt.Fprintf(&c, "  %s: %s, then %s\n", n, orNone(ca), orNone(cb))
		}
	}
	return d.String(), c.String()
}

func orNone(c cell) string {
	if c.result == "" {
		return "not run"
	}
	return c.String()
}

func TestParseCells(t *testing.T) {
	events := `budgetcheck: rewriting 3 packages
{"Action":"run","Package":"m","Test":"TestBroken/A"}
{"Action":"output","Package":"m","Test":"TestBroken/A","Output":"    x_test.go:9: CAUGHT: Linearizable: broken rule: every ...\n"}
{"Action":"output","Package":"m","Test":"TestBroken/A","Output":"    x_test.go:9: CAUGHT: Invariant: broken rule: under ...\n"}
{"Action":"output","Package":"m","Test":"TestBroken/A","Output":"    x_test.go:9: CAUGHT: Linearizable: broken rule: again\n"}
{"Action":"output","Package":"m","Test":"TestBroken/A","Output":"    x_test.go:9: CAUGHT: found by the exhaustive stage (every schedule...\n"}
{"Action":"pass","Package":"m","Test":"TestBroken/A"}
{"Action":"fail","Package":"m","Test":"TestCorrect/B"}
{"Action":"pass","Package":"m"}
`
	cells, err := parseCells([]byte(events))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]cell{
		"m TestBroken/A":  {result: "pass", caught: []string{"Invariant", "Linearizable"}},
		"m TestCorrect/B": {result: "fail"},
	}
	if f := failures(cells); !slices.Equal(f, []string{"m TestCorrect/B"}) {
		t.Errorf("failures = %q, want TestCorrect/B", f)
	}
	if d, c := compareCells(cells, want); d+c != "" || len(cells) != len(want) {
		t.Errorf("parseCells = %v, want %v:\n%s%s", cells, want, d, c)
	}
	other := map[string]cell{
		"m TestBroken/A":  {result: "pass", caught: []string{"Linearizable"}},
		"m TestBroken/D":  {result: "pass"},
		"m TestCorrect/C": {result: "pass"},
	}
	with := maps.Clone(want)
	with["m TestBroken/D"] = cell{result: "pass", caught: []string{"Race"}}
	d, c := compareCells(with, other)
	for _, w := range []string{
		"m TestBroken/D: pass (caught by Race), then pass",
		"m TestCorrect/B: fail, then not run",
		"m TestCorrect/C: not run, then pass",
	} {
		if !strings.Contains(d, w) {
			t.Errorf("compareCells does not say %q:\n%s", w, d)
		}
	}
	if w := "  m TestBroken/A: pass (caught by Invariant, Linearizable), then pass (caught by Linearizable)\n"; c != w || strings.Contains(d, "TestBroken/A") {
		t.Errorf("compareCells, the checks that caught A: %q, want %q", c, w)
	}
}

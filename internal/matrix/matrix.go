// Package matrix is the one schema of the kill matrices: the cells the
// kill-matrix tests (internal/subjects/mutants) log and cmd/budgetcheck reads back
// from go test -json.
package matrix

import (
	"encoding/json"
	"strings"
)

// The matrices.
const (
	Budgets = "budgets"
	Loops   = "loops"
)

// A Cell is one check of one implementation.
type Cell struct {
	Matrix   string  `json:"matrix"` // Budgets or Loops
	Impl     string  `json:"impl"`
	Check    string  `json:"check"`
	Verdict  string  `json:"verdict"` // pass, caught, fail, skip, crash, error
	Must     bool    `json:"must"`    // the check that must catch this mutant
	Mutant   bool    `json:"mutant"`
	Runs     int     `json:"runs"`    // times the check ran on the implementation
	Seconds  float64 `json:"seconds"` // median time of a run
	Detail   string  `json:"detail,omitempty"`
	Artifact string  `json:"artifact,omitempty"`
}

// prefix starts every logged cell line.
const prefix = "budgetcheck-cell "

// Line returns c as the line a test logs.
func (c Cell) Line() string {
	data, _ := json.Marshal(c) // a Cell always marshals
	return prefix + string(data)
}

// Parse reads a cell from a line of test output that contains one.
func Parse(line string) (Cell, bool) {
	_, rest, ok := strings.Cut(strings.TrimSpace(line), prefix)
	if !ok {
		return Cell{}, false
	}
	var c Cell
	if json.Unmarshal([]byte(rest), &c) != nil {
		return Cell{}, false
	}
	return c, true
}

// Problem says what is wrong with a cell, or "": a reference that did not
// pass, or a mutant that escaped the check that must catch it.
func (c Cell) Problem() string {
	switch {
	case !c.Mutant && c.Verdict != "pass" && c.Verdict != "skip":
		return "reference " + c.Impl + ": " + c.Check + " " + c.Verdict + "\n" + c.Detail
	case c.Must && c.Verdict != "caught":
		return "mutant " + c.Impl + " escaped " + c.Check + " (" + c.Verdict + ")\n" + c.Detail
	}
	return ""
}

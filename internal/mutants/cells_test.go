package mutants_test

import (
	"encoding/json"
	"testing"
	"time"
)

// A Cell is one check of one implementation, as cmd/budgetcheck reads it
// from the kill-matrix tests' output (lines starting with cellPrefix).
type Cell struct {
	Matrix   string  `json:"matrix"` // "budgets" or "loops"
	Impl     string  `json:"impl"`
	Check    string  `json:"check"`
	Verdict  string  `json:"verdict"` // pass, caught, inconclusive, error, skip, crash
	Must     bool    `json:"must"`    // the check that must catch this mutant
	Mutant   bool    `json:"mutant"`
	Seconds  float64 `json:"seconds"` // median time
	Detail   string  `json:"detail,omitempty"`
	Artifact string  `json:"artifact,omitempty"`
}

const cellPrefix = "budgetcheck-cell "

func emit(t *testing.T, c Cell) {
	t.Helper()
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(cellPrefix + string(data))
}

func seconds(d time.Duration) float64 { return d.Round(time.Millisecond).Seconds() }

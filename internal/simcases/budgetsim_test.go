package simcases_test

import (
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/retrybudget/retrybudget/internal/sim"
	"github.com/retrybudget/retrybudget/internal/simcases"
)

var (
	budgetsimOut  = flag.String("budgetsim.out", "", "cmd/budgetsim: write every scenario's results as JSON to this file")
	budgetsimSeed = flag.Uint64("budgetsim.seed", 1, "cmd/budgetsim: the seed")
)

// Report is what TestBudgetsim writes for cmd/budgetsim.
type Report struct {
	Scenarios []ScenarioReport `json:"scenarios"`
}

type ScenarioReport struct {
	Name    string       `json:"name"`
	Names   []string     `json:"names"`
	Results []sim.Result `json:"results"`
}

// TestBudgetsim runs cmd/budgetsim's scenarios. The simulation needs a
// testing/synctest bubble, and so a *testing.T: cmd/budgetsim runs this test
// with -budgetsim.out and prints what it writes.
func TestBudgetsim(t *testing.T) {
	if *budgetsimOut == "" {
		t.Skip("run by cmd/budgetsim")
	}
	var rep Report
	for _, s := range simcases.Scenarios(*budgetsimSeed) {
		sr := ScenarioReport{Name: s.Name}
		for _, c := range simcases.Contenders() {
			cfg := s.Config
			cfg.NewBudget = c.NewBudget
			r, err := sim.Run(t, cfg)
			if err != nil {
				t.Fatalf("%s, %s: %v", s.Name, c.Name, err)
			}
			r.Config.NewBudget = nil
			sr.Names = append(sr.Names, c.Name)
			sr.Results = append(sr.Results, r)
		}
		rep.Scenarios = append(rep.Scenarios, sr)
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*budgetsimOut, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

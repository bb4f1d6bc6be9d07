package sim

import (
	"testing"

	"github.com/retrybudget/retrybudget/internal/sim"
)

// Config describes one simulated outage.
//
// Deprecated: the simulation is the engine of budgettest's Amplification
// check and of cmd/budgetsim, and moves inside the module in the next
// release. Check a budget's amplification with budgettest.
type Config = sim.Config

// Second is one second of virtual time of a run.
//
// Deprecated: see Config.
type Second = sim.Second

// Result is what a run measured.
//
// Deprecated: see Config.
type Result = sim.Result

// Run simulates c.
//
// Deprecated: see Config.
func Run(t *testing.T, c Config) (Result, error) { return sim.Run(t, c) }

package budgettest

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/yield"
)

// The flags of controlled runs. They matter only when the code under test
// is instrumented (go run github.com/retrybudget/retrybudget/cmd/budgetcheck).
var (
	schedulesFlag = flag.Int("budgettest.schedules", defaultSchedules,
		"schedules the Linearizable check explores per scenario when the code is instrumented (0: run freely)")
	seedFlag = flag.Uint64("budgettest.seed", 0,
		"the seed base of the schedules explored: the same base explores the same schedules")
	replayFlag = flag.String("budgettest.replay", "",
		"replay one scenario in the Linearizable check, exactly: the JSON a failure prints, or the path of a saved history (.json)")
)

// defaultSchedules is how many schedules the Linearizable check explores
// per scenario under control.
const defaultSchedules = 8

// controlled reports whether the Linearizable check runs its scenarios
// under the controlled scheduler.
func controlled() bool { return yield.Instrumented() && *schedulesFlag > 0 }

// strategyFor is the strategy of the k-th schedule of a scenario: PCT of
// depth 2 and 3 (one and two preemptions) and the random walk, in turn.
func strategyFor(k int) yield.Strategy {
	switch k % 3 {
	case 0:
		return yield.PCT(2)
	case 1:
		return yield.Walk()
	default:
		return yield.PCT(3)
	}
}

// control returns the options of the k-th schedule explored for the
// scenario of seed: distinct for every (base, seed, k).
func control(s linearizability.Scenario, seed uint64, k int) *yield.Options {
	return &yield.Options{
		Seed:     *seedFlag<<32 ^ seed<<8 ^ uint64(k),
		Strategy: strategyFor(k),
		// About three yield points per operation: the one between
		// operations, and a load and an update inside most budgets.
		Length: 3 * s.Len(),
	}
}

// replayScenario reads the -budgettest.replay flag: a scenario as JSON, or
// a saved fixture holding one.
func replayScenario() (*linearizability.Scenario, error) {
	v := strings.TrimSpace(*replayFlag)
	if v == "" {
		return nil, nil
	}
	if !strings.HasPrefix(v, "{") {
		f, err := linearizability.LoadFixture(v)
		if err != nil {
			return nil, fmt.Errorf("budgettest: -budgettest.replay: %w", err)
		}
		if f.Scenario == nil {
			return nil, fmt.Errorf("budgettest: -budgettest.replay: %s holds no scenario", v)
		}
		return f.Scenario, nil
	}
	var s linearizability.Scenario
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return nil, fmt.Errorf("budgettest: -budgettest.replay: %w", err)
	}
	return &s, nil
}

// replayCommand is the flag that replays s, for a failure message.
func replayCommand(s linearizability.Scenario) string {
	js, err := json.Marshal(s)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("-budgettest.replay='%s'", js)
}

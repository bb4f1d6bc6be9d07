package budgettest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/retrybudget/retrybudget/internal/control"
	"github.com/retrybudget/retrybudget/linearizability"
)

// controlled reports whether this process explores controlled schedules
// itself: its code is instrumented (a child of the suite, or a run of
// cmd/budgetcheck). The policy is package internal/control's.
func controlled() bool { return control.Controlled() }

// inChild reports whether this process is a child that runs only the
// controlled stage of a check: it then skips the free runs its parent made.
func inChild() bool { return control.InChild() }

// replayScenario reads the -budgettest.replay flag: a scenario as JSON, or
// a saved fixture holding one.
func replayScenario() (*linearizability.Scenario, error) {
	v := control.Replay()
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

package linearizability

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/retrybudget/retrybudget/model"
)

// ModelSpec names one of the model package's specifications with its
// parameters. Exactly one field is set.
type ModelSpec struct {
	TokenBucket *model.TokenBucket `json:"tokenBucket,omitempty"`
	Ratio       *model.Ratio       `json:"ratio,omitempty"`
	Throttle    *model.Throttle    `json:"throttle,omitempty"`
}

func (s ModelSpec) count() int {
	n := 0
	if s.TokenBucket != nil {
		n++
	}
	if s.Ratio != nil {
		n++
	}
	if s.Throttle != nil {
		n++
	}
	return n
}

// Check checks h against the model s names and returns the verdict, with
// the explanation for a violation.
func (s ModelSpec) Check(h History, timeout time.Duration) (Verdict, string, error) {
	if s.count() != 1 {
		return 0, "", errors.New("linearizability: a ModelSpec must name exactly one model")
	}
	switch {
	case s.TokenBucket != nil:
		r := Check(*s.TokenBucket, h, timeout)
		return r.Verdict, r.Explain(), nil
	case s.Ratio != nil:
		r := Check(*s.Ratio, h, timeout)
		return r.Verdict, r.Explain(), nil
	}
	r := Check(*s.Throttle, h, timeout)
	return r.Verdict, r.Explain(), nil
}

// A Fixture is a recorded history with the verdict it must keep getting.
// Tests save the histories of the violations they find, and re-check every
// saved one on each run.
type Fixture struct {
	Name     string    `json:"name"`
	Budget   string    `json:"budget"` // the implementation that was recorded
	Model    ModelSpec `json:"model"`
	Verdict  Verdict   `json:"verdict"`
	Scenario *Scenario `json:"scenario,omitempty"` // what was run, if known
	History  History   `json:"history"`
}

// Save writes f as indented JSON to path, creating its directory.
func (f Fixture) Save(path string) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// LoadFixture reads a Fixture saved by Save.
func LoadFixture(path string) (Fixture, error) {
	var f Fixture
	data, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return f, fmt.Errorf("linearizability: %s: %w", path, err)
	}
	if f.Model.count() != 1 {
		return f, fmt.Errorf("linearizability: %s: the model must name exactly one specification", path)
	}
	return f, nil
}

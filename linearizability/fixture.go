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
// parameters, so that a saved history can be checked again without code.
// At most one field is set; none for a model of your own.
type ModelSpec struct {
	TokenBucket *model.TokenBucket `json:"tokenBucket,omitempty"`
	Ratio       *model.Ratio       `json:"ratio,omitempty"`
	Throttle    *model.Throttle    `json:"throttle,omitempty"`
}

func (s ModelSpec) count() int {
	n := 0
	for _, set := range []bool{s.TokenBucket != nil, s.Ratio != nil, s.Throttle != nil} {
		if set {
			n++
		}
	}
	return n
}

// specOf returns the ModelSpec of m, empty for a model of your own.
func specOf[S any](m model.Model[S]) ModelSpec {
	switch v := any(m).(type) {
	case model.TokenBucket:
		return ModelSpec{TokenBucket: &v}
	case model.Ratio:
		return ModelSpec{Ratio: &v}
	case model.Throttle:
		return ModelSpec{Throttle: &v}
	}
	return ModelSpec{}
}

// A Fixture is a recorded history with the verdict it must keep getting:
// the suite saves one for every violation it finds, and tests re-check
// every saved one on each run.
type Fixture struct {
	Name   string `json:"name"`
	Budget string `json:"budget"` // the implementation that was recorded
	// Model is the specification, when it is one of the model package's;
	// ModelName names it (its Go type and parameters) in every case.
	Model     ModelSpec     `json:"model"`
	ModelName string        `json:"modelName,omitempty"`
	Rule      string        `json:"rule,omitempty"` // the rule the history breaks, if any
	Verdict   Verdict       `json:"verdict"`
	Scenario  *Scenario     `json:"scenario,omitempty"` // what was run, if known
	History   model.History `json:"history"`
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
	if f.Model.count() > 1 {
		return f, fmt.Errorf("linearizability: %s: the model names %d specifications, at most one is allowed", path, f.Model.count())
	}
	return f, nil
}

// Check checks the fixture's history against the model it names, and
// returns the verdict and, for a violation, the explanation. For a model of
// your own, whose parameters a fixture cannot hold, use Recheck.
func (f Fixture) Check(timeout time.Duration) (Verdict, string, error) {
	switch s := f.Model; {
	case s.TokenBucket != nil:
		r := Check(*s.TokenBucket, f.History, timeout)
		return r.Verdict, r.Explain(), nil
	case s.Ratio != nil:
		r := Check(*s.Ratio, f.History, timeout)
		return r.Verdict, r.Explain(), nil
	case s.Throttle != nil:
		r := Check(*s.Throttle, f.History, timeout)
		return r.Verdict, r.Explain(), nil
	}
	return 0, "", errors.New("linearizability: the fixture's model (" + f.ModelName + ") is not one of the model package's: check it with Recheck and the model value")
}

// Recheck checks the fixture's history against m, any model, yours
// included.
func Recheck[S any](f Fixture, m model.Model[S], timeout time.Duration) Result[S] {
	return Check(m, f.History, timeout)
}

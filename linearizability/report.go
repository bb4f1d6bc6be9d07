package linearizability

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// A Subject is a budget under test and the model it claims to follow.
type Subject[S any] struct {
	Model model.Model[S]
	// New builds a budget on clock, which reads 0. It is called once per
	// recorded run.
	New func(clock budget.Clock) budget.Budget
	// Gen says what scenarios to draw; its Scale must be set for a budget
	// whose answers depend on time, or no clock steps are drawn.
	Gen GenConfig
	// Advance, if set, moves time instead of the ManualClock's Advance (see
	// RecordWith).
	Advance func(clock *budget.ManualClock, d time.Duration)
}

// Trial records s once on a budget of sub and checks the history.
func Trial[S any](ctx context.Context, sub Subject[S], s Scenario, timeout time.Duration) (Result[S], error) {
	h, err := RecordWith(ctx, s, sub.New, sub.Advance)
	if err != nil {
		return Result[S]{}, err
	}
	return Check(sub.Model, h, timeout), nil
}

// Report shows a violation to a human: it writes porcupine's HTML rendering
// and the history as a Fixture to t.ArtifactDir() (kept with go test
// -artifacts), and logs their paths with the explanation. It returns the
// path of the HTML file. name names the files.
func Report[S any](t testing.TB, r Result[S], spec ModelSpec, budgetName, name string) string {
	t.Helper()
	dir := t.ArtifactDir()
	base := sanitize(name)
	html := filepath.Join(dir, base+".html")
	if err := r.WriteHTML(html); err != nil {
		t.Logf("could not write the HTML rendering: %v", err)
		html = ""
	}
	js := filepath.Join(dir, base+".json")
	f := Fixture{Name: name, Budget: budgetName, Model: spec, Verdict: r.Verdict, History: r.History}
	if err := f.Save(js); err != nil {
		t.Logf("could not save the history: %v", err)
		js = ""
	}
	t.Logf("%s\nrendering: %s\nhistory:   %s", r.Explain(), html, js)
	return html
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, name)
}

// Spec returns the ModelSpec of a model from the model package, or false
// for any other model.
func Spec[S any](m model.Model[S]) (ModelSpec, bool) {
	switch v := any(m).(type) {
	case model.TokenBucket:
		return ModelSpec{TokenBucket: &v}, true
	case model.Ratio:
		return ModelSpec{Ratio: &v}, true
	case model.Throttle:
		return ModelSpec{Throttle: &v}, true
	}
	return ModelSpec{}, false
}

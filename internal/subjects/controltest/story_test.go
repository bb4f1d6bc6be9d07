package controltest_test

import (
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/subjects/controltest"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

// Under control, the search tells the violation it found in the budget's
// own lines: the line of the budget's code where a goroutine was
// preempted, with its source, where it resumed, and the answer the model
// gives otherwise.
func TestSearchTellsTheInterleavingInTheBudgetsLines(t *testing.T) {
	t.Parallel()
	f, err := linearizability.Search(t, linearizability.Target[model.TokenBucketState]{
		Name:      "CheckThenAct",
		Model:     bucket,
		New:       func(*testing.T, budget.Clock) budget.Budget { return controltest.NewCheckThenAct(bucket) },
		Scenarios: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	if f == nil || f.Verdict != linearizability.Violation {
		t.Fatalf("Search = %+v, want a violation", f)
	}
	t.Logf("\n%s", f.Detail)
	for _, want := range []string{
		"is preempted at doc.go:",
		"in (*CheckThenAct).Retry",
		"| yield.P(&b.tokens).",
		"resumes at doc.go:",
		"<- the model answers denied",
	} {
		if !strings.Contains(f.Detail, want) {
			t.Errorf("the story lacks %q", want)
		}
	}
}

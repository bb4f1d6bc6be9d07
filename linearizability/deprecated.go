package linearizability

import (
	"context"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/yield"
)

// The search's steps, exported before Search took them in. Each is kept
// for one release, for code that assembled a search by hand.

// ExhaustReport is what an exhaustive search ran.
//
// Deprecated: use Search, which runs the exhaustive stage under control.
type ExhaustReport = exhaustReport

// MinimizeReport is what a minimization found.
//
// Deprecated: use Search, which minimizes what it finds.
type MinimizeReport[W any] = minimizeReport[W]

// RecordControlled runs s once on a budget from newBudget, under s.Control when set.
//
// Deprecated: use Search, or Record for a history recorded by hand.
func RecordControlled(ctx context.Context, s Scenario, newBudget func(budget.Clock) budget.Budget) (History, yield.Report, error) {
	return recordControlled(ctx, s, newBudget)
}

// Focus returns smaller scenarios around the operations of a violation.
//
// Deprecated: use Search, which narrows what it finds.
func Focus[S any](r Result[S], s Scenario) []Scenario { return focus(r, s) }

// Minimize shrinks a failing scenario.
//
// Deprecated: use Search, which minimizes what it finds.
func Minimize[W any](s Scenario, tries int, limit time.Duration, fails func(Scenario) (W, bool)) MinimizeReport[W] {
	return minimize(s, tries, limit, fails)
}

// Report saves a violation as HTML and as a Fixture.
//
// Deprecated: use Search, whose Finding names the files it saved.
func Report[S any](t testing.TB, r Result[S], f Fixture) (htmlPath, jsonPath, note string) {
	return report(t, r, f)
}

// Interleaving tells a controlled run of s in the budget's own lines.
//
// Deprecated: use Search, whose Finding tells the failing schedule.
func Interleaving[S any](ctx context.Context, m model.Model[S], s Scenario, newBudget func(budget.Clock) budget.Budget) (string, error) {
	return interleaving(ctx, m, s, newBudget)
}

// Exhaust runs s under every schedule with at most bound preemptions.
//
// Deprecated: use Search, which runs the exhaustive stage under control.
func Exhaust(ctx context.Context, s Scenario, newBudget func(budget.Clock) budget.Budget, bound, limit int,
	found func(History, yield.Report) bool) (ExhaustReport, error) {
	return exhaust(ctx, s, newBudget, bound, limit, false, found)
}

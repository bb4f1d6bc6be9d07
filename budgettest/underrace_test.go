package budgettest_test

import (
	"github.com/retrybudget/retrybudget/internal/race"
	"testing"
)

// skipUnderRace skips, under the race detector, a test of the suite's
// verdict on a subject that is not this module's production code (a
// third-party budget, a port, a test double, a misused Subject): the
// verdict is the same without -race, whose run (go test ./..., which CI
// makes as well as go test -race ./...) keeps it; under -race, which slows
// each run five to ten times, the reference budgets, Keyed and the
// adapters are what the suite is run on.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if race.Enabled {
		t.Skip("the suite's verdict on a subject outside this module's production code: checked by go test ./... without -race")
	}
}

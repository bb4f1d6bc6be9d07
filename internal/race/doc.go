// Package race says whether the race detector is on, for the project's
// tests and checks whose runs it slows five to ten times (they make fewer
// runs there), and for the checks whose verdict it cannot change (they are
// skipped there and run by go test ./... without -race).
package race

import "testing"

// Skip skips t under the race detector, saying why its verdict does not
// need it: the run without -race, which CI makes too, keeps the verdict.
func Skip(t testing.TB, why string) {
	t.Helper()
	if Enabled {
		t.Skip("skipped under -race: " + why)
	}
}

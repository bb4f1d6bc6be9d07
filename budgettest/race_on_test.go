//go:build race

package budgettest_test

// raceEnabled reports whether the race detector is on.
const raceEnabled = true

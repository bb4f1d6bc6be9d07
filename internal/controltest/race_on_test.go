//go:build race

package controltest_test

// defaultReps is -control.reps's default: under the race detector, which
// sees no race in a controlled run (every switch is a synchronization) and
// makes each run several times slower, two seed bases.
const defaultReps = 2

// raceEnabled reports whether the race detector is on.
const raceEnabled = true

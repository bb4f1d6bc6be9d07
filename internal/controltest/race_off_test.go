//go:build !race

package controltest_test

// defaultReps is -control.reps's default (see race_on_test.go).
const defaultReps = 5

// raceEnabled reports whether the race detector is on.
const raceEnabled = false

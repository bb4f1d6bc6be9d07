//go:build !race

package controltest_test

// defaultReps is -control.reps's default (see race_on_test.go).
const defaultReps = 5

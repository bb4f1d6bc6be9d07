//go:build !race

package mutants_test

const raceEnabled = false

//go:build race

package mutants_test

const raceEnabled = true

//go:build race

package stress_test

const raceEnabled = true

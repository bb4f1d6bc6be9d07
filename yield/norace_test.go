//go:build !race

package yield_test

const raceEnabled = false

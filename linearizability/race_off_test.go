//go:build !race

package linearizability_test

const raceEnabled = false

//go:build !race

package redisbudget_test

// raceEnabled reports whether the race detector is on.
const raceEnabled = false

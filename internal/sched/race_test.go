//go:build race

package sched_test

// raceEnabled is set when the race detector is on, which makes a step of
// a controlled run some ten times slower.
const raceEnabled = true

//go:build !race

package zoo

// raceEnabled reports whether the race detector is on.
const raceEnabled = false

//go:build race

package unseen

const raceEnabled = true

//go:build race

package classes

const raceEnabled = true

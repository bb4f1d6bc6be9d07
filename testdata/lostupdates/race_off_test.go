//go:build !race

package lostupdates

const raceEnabled = false

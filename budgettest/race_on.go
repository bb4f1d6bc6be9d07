//go:build race

package budgettest

// raceEnabled reports whether the race detector is on: its runs are five to
// ten times slower, and the Invariant check then makes fewer free stress
// runs (see familySeeds).
const raceEnabled = true

// raceRuns is 1 under the race detector, for constants that shrink there.
const raceRuns = 1

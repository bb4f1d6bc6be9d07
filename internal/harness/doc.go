// Package harness is what every check of the suite stands on: the one
// description of a budget under test ([Subject]), applying an operation to
// a budget ([Perform]), the one operation generator with a rapid and a
// math/rand back end ([Source]), and the one guard that runs a piece of a
// check with recover and a watchdog and says what went wrong ([Guard],
// [Fault]).
//
// The checkers (internal/seqcheck, linearizability, internal/stressrun,
// sim) and the suite (budgettest) import it; it imports none of them.
package harness

// Package classes holds retry budgets of four classes of bug, each broken
// budget beside its model, and correct budgets built the same ways, written
// from the public contract of github.com/retrybudget/retrybudget alone (the
// budget and model packages' documentation and the reference budgets) by a
// team that has not read the conformance suite's implementation, to measure
// that suite from the outside.
//
// The four classes of broken budget, one a file:
//
//  1. Float drift after long runs (float_*.go): arithmetic in float64 that
//     answers exactly as the integer model for every short sequence and
//     parts from it only after a long one. GRPCFloatThrottle keeps gRPC's
//     throttle count in float64 as grpc-go does; DimeBonusBucket adds 0.1
//     token a success; FloatRatio and FloatPercentInFlight truncate a
//     float64 product of a share and a count. Each doc comment gives the
//     length of the shortest sequence that parts it from its model.
//  2. Flags and caches published outside the critical section (late_*.go):
//     a fast-path flag or a cached limit computed under a mutex and stored
//     after the unlock, so that a stale value can overwrite a fresh one.
//  3. Seqlock and version mistakes (seqlock_*.go): a lock-free deny path
//     reading a snapshot that the writers publish under a version counter,
//     with the reader's check or the writer's bump wrong, so a torn snapshot
//     denies a retry that every order grants.
//  4. Stale reads that need several operations of other goroutines
//     (stale_*.go, optimistic_*.go): a limit computed before a
//     compare-and-swap loop, or an optimistic charge undone later. One
//     interfering operation only makes the loop retry or is harmless; two
//     are needed for a wrong answer.
//
// Driven by one goroutine, a broken budget of classes 2 to 4 answers exactly
// as its model does, always; one of class 1 does for at least its first 86
// operations, whatever they are. Each broken budget's doc comment states its
// bug, the interleaving (for class 1, the sequence) that parts it from its
// model, and the wrong outcome.
//
// The correct budgets (correct_*.go) are built the same ways and must pass
// every check: float64 holding whole milli-tokens, a fast-path flag written
// inside the critical section, correct seqlocks, a limit kept in the lock,
// and a compare-and-swap loop that decides on the word it swaps.
//
// The broken budgets of classes 2 to 4 call testHook at the point where their
// bug lives. It is nil outside this package's tests, which set it to run
// another goroutine's calls at exactly that point, so forcing the bad
// interleaving deterministically, as evidence of each bug independent of the
// suite (TestEvidence).
package classes

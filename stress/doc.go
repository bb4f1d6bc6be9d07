// Package stress runs a retry budget, or a retry loop, under heavy
// concurrency and checks what must hold however the goroutines interleave.
//
// For budgets, [Stress] releases many goroutines (by default 4 ×
// GOMAXPROCS, with GOMAXPROCS raised to at least 8) at a barrier, in phases
// that drain the budget and then mix retries with successes, and records
// every call with call and return stamps from one atomic counter. The
// conservation invariants then check the recorded log: a token bucket never
// grants more than it could have held, a ratio budget never grants more than
// its window allows, a throttle never grants at or below its threshold.
// Each invariant is checked at every grant, counting only what had surely
// happened by then on one side and what might have on the other, so it can
// fail only for a broken budget. Run it under go test -race: the race
// detector catches plain data races, and the invariants catch what it
// cannot see, such as a check-then-act made of two atomic operations.
//
// For retry loops, [LoopChecks] are the checks that a loop never attempts on
// a done context, returns promptly when cancelled, leaks no goroutine,
// respects a shared budget, and so on; they run any loop through a small
// adapter, [Loop].
//
// A watchdog turns a deadlocked budget into an error instead of a hung test.
package stress

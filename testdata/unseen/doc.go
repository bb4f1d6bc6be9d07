// Package unseen holds retry budgets written from the public contract of
// github.com/retrybudget/retrybudget alone (the budget and model packages'
// documentation and the reference budgets), by a team that has never seen
// the conformance suite's implementation, to measure that suite from the
// outside.
//
// Two kinds of budget live here, one a file:
//
//   - Broken budgets, each with exactly one concurrency bug of a kind real
//     code has. Driven by one goroutine each answers exactly as its model
//     does; the bug shows only when two or more goroutines interleave at the
//     point its doc comment names. Each doc comment gives the interleaving
//     step by step and the wrong outcome.
//   - Correct budgets of unusual designs (a spin lock, copy-on-write, a
//     budget reached through budget.Keyed, an actor goroutine, a channel
//     used as a mutex, lock-free pending credits, a TryLock spin), which
//     must pass every check.
//
// Several broken budgets call testHook at the point where their bug lives.
// It is nil outside this package's tests, which set it to run another
// goroutine's call at exactly that point and so force the bad interleaving
// deterministically, as independent evidence of each bug.
package unseen

// Package budgettest is the conformance suite for retry budgets and retry
// loops: the checks of this module, run on your implementation from your
// own tests, as a CI gate.
//
// [Run] puts a budget through every check as subtests, against the
// sequential model it claims to follow; [Verify] returns the failures
// joined instead, and [VerifyCheck] runs one check. [Fuzz] is the Edges
// check as a go test -fuzz target. [RunLoop] puts a retry loop, through a
// small adapter (stress.Loop), through the eleven loop checks of the stress
// package, each in a child process. See ExampleRun and ExampleRunLoop.
//
// Every failure is a [Failure] that names the rule broken and the line of
// this package that found it broken. The suite validates a [Subject] before
// any check runs, recovers every panic (the factory's, the budget's, the
// model's), times out every piece of a check, and closes every budget it
// builds: a bad subject fails with a rule of its own and never crashes or
// hangs the test binary.
//
// The project's own kill matrix (internal/mutants, printed by
// cmd/budgetcheck) runs through VerifyCheck: each deliberately broken
// budget is caught by the check that must catch it, and every reference
// budget passes every check.
//
// What it can and cannot prove: see Run.
package budgettest

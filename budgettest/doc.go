// Package budgettest is the conformance suite for retry budgets and retry
// loops: the checks of this module, run on your implementation from your
// own tests, as a CI gate.
//
// [Run] puts a budget through every check as subtests, against the
// sequential model it claims to follow; [Verify] returns the failures
// joined instead, and [VerifyCheck] runs one check. [Fuzz] is the Edges
// check as a go test -fuzz target. [RunLoop] puts a retry loop, through a
// small adapter (stress.Loop), through the twelve loop checks of the stress
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
//
// # Writing a model for your budget
//
// When none of the model package's models states your budget's rule, write
// one: a type that implements [model.Model] for a state type S of its own.
// A model is the budget's rule with nothing else in it: no locks, no
// atomics, no clock of its own. Init returns the state of a new budget,
// and Step(s, op) returns the next state and, for a Retry, the answer. Step
// is a pure function of its arguments, and states are values: Step must
// never change the state it is given, since the Linearizable check keeps
// old states and steps each of them many times. Keep fixed-size arrays
// rather than slices and maps, or copy before you write.
//
// Abilities are optional interfaces of the model package, found by type
// assertion; each buys a check, or a sharper one:
//
//   - [model.Validator]: Validate rejects parameters the model cannot work
//     with, before any check runs, instead of a crash in the middle of one.
//   - [model.Timed]: Timing gives the clock steps that matter, a slot width
//     and a window, so that a Subject need not set Scale and Horizon. A
//     model whose answers depend on time and that has neither fails the
//     subject.
//   - [model.Balancer]: Balance is compared, after every operation, with
//     the budget's Available() float64 when it has one: a state gone wrong
//     shows before any answer does.
//   - [model.Starter]: InitAt lets the Edges check start the budget on a
//     clock reading negative instants and the ends of int64.
//   - [model.Resetter]: only a model that has it is given Reset, the loss
//     of state of a budget kept in a store that restarts; Step of any
//     other model never sees it.
//   - [model.Structured] and [model.InFlightLimit], for a budget that
//     counts work in flight: the first makes the checks draw whole calls
//     and send AttemptEnd and CallEnd, the second gives the Race check the
//     bound to hold at every grant.
//
// Time is data. The state holds a [model.Clock]; Step answers Advance with
// [model.Clock.Advance] and changes nothing else. An operation that, in
// the budget, reads the clock calls [model.Clock.Observe] first and
// measures the time passed from the old Seen to the new one. Observe is the
// forward-only rule: a reading behind the latest one seen counts as the
// latest, so a clock stepped back neither refills nor expires anything
// twice.
//
// Equal(a, b) means that a and b behave the same from now on: every
// sequence of operations gets the same answers from both. Plain == on S
// says just that when Step keeps one representation per behaviour: slots
// in age order rather than in a ring, expired counts dropped, a full
// bucket without a fraction. Otherwise compare only what matters. An
// Equal stricter than behaviour is safe and only slows the Linearizable
// search; a looser one can pass a history that is not linearizable. Hash
// hashes the fields Equal compares, with [model.Hash].
//
// Answer every input, and say how in Step's documentation: a Retry of a
// kind that is not a retry kind is denied and changes nothing, as the
// Budget contract says; an in-flight model ignores the end of something
// that never started. Step must never panic: a minimized counterexample
// may hold input the checks never draw on their own.
//
// The Model check, the first that Run runs, checks the model itself: two
// Inits are Equal, the same state and operation give Equal states, equal
// hashes and the same answer, and nothing panics, over 2000 operations.
// It cannot tell whether the model states the rule you meant: give the
// model tests of its own, from the rule's documentation; the other checks
// then fail a budget wherever it and the model part.
//
// The package example WritingAModel (Example_writingAModel, in
// example_model_test.go) is a worked one: a Go port of tower's TpsBudget
// (tower/src/retry/budget/tps_budget.rs), a model of the rule it
// documents, each of these decisions explained, and the suite catching
// tower issue #857: a retry_percent of 0.3 that allows a third of the
// requests.
package budgettest

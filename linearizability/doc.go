// Package linearizability records concurrent runs of a retry budget and
// checks them against the budget's sequential model with porcupine.
//
// The race detector cannot see the bug that matters most in a budget: an
// atomic load followed by an atomic add is free of data races and still
// overspends. A linearizability check sees it, because no order of the
// operations explains two concurrent retries both granted from a balance
// that pays for one.
//
// The pieces:
//
//   - A [Scenario] says what to run: operations before the concurrent part,
//     one operation list per goroutine, and the steps of a clock goroutine.
//   - [Record] runs a scenario on a budget built on a [budget.ManualClock]:
//     the goroutines start together at a barrier, every Advance of the clock
//     is an operation of the same history, and calls and returns are stamped
//     from one atomic counter.
//   - [Check] searches for an order of the [History] that the model accepts.
//     Its [Result] is Linearizable, a Violation (with the longest order that
//     works, the operations that cannot come next and the model's state
//     there), or Inconclusive when the search ran out of time, which is never
//     a pass. A history may hold pending calls, whose outcome is unknown.
//   - [Focus] narrows a violation to the operations around it, and
//     [Minimize] shrinks a failing scenario, which rapid cannot do for a
//     failure that reproduces only some of the time.
//   - [Report] saves a violation as porcupine's HTML rendering and as a
//     [Fixture], JSON that [LoadFixture] reads back and [Recheck] checks
//     again against any model.
//
// See ExampleRecord and ExampleCheck. budgettest's Linearizable check is
// these pieces put together; use it unless you record histories yourself (a
// budget kept in a server, say). A linearizable history proves nothing
// about the interleavings that did not happen: run many scenarios, under
// -race, with more goroutines than cores.
package linearizability

// Package linearizability records concurrent runs of a retry budget and
// checks them against the budget's sequential model with porcupine.
//
// The race detector cannot see the bug that matters most in a budget: an
// atomic load followed by an atomic add is free of data races and still
// overspends. A linearizability check sees it, because no order of the
// operations explains two concurrent retries both granted from a balance
// that pays for one.
//
// [Search] is the one entry point: given a [Target] (a budget's factory,
// its model, the shape of the scenarios), it looks for a violation and
// returns a [Finding] that explains it. budgettest's Linearizable check is
// one call of it, and so are the Redis budget's tests, whose histories a
// [Target.Record] function makes over the network. Inside it:
//
//   - A [Scenario] says what to run: operations before the concurrent part,
//     one operation list per goroutine, and the steps of a clock goroutine.
//   - Under control (code rewritten by budgetcheck, see package yield),
//     small scenarios at the model's edges run first under every schedule
//     with at most two preemptions (the smallest again with three inside
//     calls), then random ones
//     under a few controlled schedules each; without control, runs are free.
//   - [Check] searches for an order of each [model.History] that the model
//     accepts. Its [Result] is Linearizable, a Violation (with the longest
//     order that works, the operations that cannot come next and the
//     model's state there), or Inconclusive when the search ran out of
//     time, which is never a pass. A history may hold pending calls, whose
//     outcome is unknown.
//   - [Record] also notes, for each call, stamps around the clock readings
//     it made on its own goroutine (model.Operation's ReadFrom and
//     ReadTo). Check first searches with each call's interval cut to them,
//     where a budget that decides under its lock leaves nothing to guess,
//     and searches the whole intervals only if that finds no order in a
//     second. The cut search can only prove a history linearizable, never
//     reject one: on a correct budget holding its lock across other
//     packages' locks, the whole search took seconds and gigabytes where
//     the cut one takes milliseconds.
//   - A violation is narrowed to the operations around it, shrunk to a
//     smaller failing scenario (which rapid cannot do for a failure that
//     reproduces only some of the time), its schedule cut to the fewest
//     preemptions, and told in the budget's own lines.
//   - It is saved as porcupine's HTML rendering and as a [Fixture], JSON
//     that [LoadFixture] reads back and [Recheck] checks again against any
//     model.
//
// [Record] and [Check] stay public for a history recorded by hand: see
// ExampleRecord and ExampleCheck. A linearizable history proves nothing
// about the interleavings that did not happen: run many scenarios, under
// -race, with more goroutines than cores.
package linearizability

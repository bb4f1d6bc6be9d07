// Package model holds the sequential specifications of the reference retry
// budgets: what each budget must answer when its operations happen one at a
// time.
//
// A specification is a pure function. [Model.Step] takes a state and an
// [Op] and returns the next state and the operation's output, changing
// nothing it was given. The harness replays the same operations on an
// implementation and on its model and compares every output (the sequential
// check), or searches for an order of a concurrent history that the model
// accepts (the linearizability check).
//
// The operations are those of the budget contract plus the clock:
// Request, Retry(kind) which answers granted or denied, Success(kind), and
// Advance(d), which moves the clock the budget was built with by d; for a
// budget that counts work in flight ([InFlight], a [Structured] model),
// AttemptEnd(kind) and CallEnd; and Reset, the loss of a budget's state
// when the store that keeps it restarts without persistence, given only to
// a [Resetter]. Time is
// data here: a state carries the clock's reading and the latest reading the
// budget has seen, and an operation that observes time uses the later of the
// two. A reading earlier than the latest one seen counts as the latest one,
// so no interval is ever refilled or expired twice.
//
// Which operations observe the clock is part of each specification: an
// operation that changes nothing, such as Request on a token bucket, does
// not.
//
// This package uses only the standard library and imports no budget
// implementation: a specification that shared code with what it specifies
// could not catch that code's bugs.
package model

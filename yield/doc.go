// Package yield holds the hooks that code rewritten by cmd/budgetcheck
// calls at each of its synchronization points: every sync/atomic
// operation, every Lock and Unlock of a sync mutex, every sync.Once.Do and
// sync.Cond and sync.WaitGroup call, every channel operation, every select
// statement, every field a budget shares, and every runtime.Gosched and
// time.Sleep pass through one of them first. The rewritten files go to go
// test -overlay: your sources never change, and line numbers in stacks and
// failures are yours. Outside a controlled run each hook is one atomic load
// and a branch, and then the operation itself.
//
// No hand-written code needs this package. The generic hooks are [P], [W],
// [Send], [Recv], [Recv2], [Range], [Close], and the cases [R] and [S] of a
// select; every other hook is a method of the one value [Hook]. Their
// signatures follow what the rewrite needs, and they change with it.
//
// The scheduler that runs the rewritten code under controlled schedules
// (PCT, a random walk, and the exhaustive search of a bounded number of
// preemptions) is internal to this module: budgettest's controlled stages
// and cmd/budgetcheck use it. What a user meets of it is [Options], the
// schedule a failure prints and a replay carries, and [Instrumented], which
// reports whether the running code was rewritten.
package yield

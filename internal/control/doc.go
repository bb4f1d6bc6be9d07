// Package control is the one policy of the suite's controlled runs: its
// flags, the schedules each check explores, and the way a test binary that
// is not instrumented gets a controlled verdict anyway.
//
// # Why a child process
//
// A controlled run needs the code under test rewritten (package
// internal/instrument): every synchronization point must call package
// yield. The test binary go test builds is not, so [Binary] rewrites the
// calling test's package, the package of the subject's type wherever it
// lives, and the packages of the main module the test imports, builds that
// test binary once with go test -c, and [Spawn] runs the controlled stage of
// one check in it as a child process, the way go test -fuzz runs its
// workers. The parent, the binary go test built, keeps the free stage and
// reports the child's verdict as its own. Two other routes were weighed:
// rewriting at compile time through -toolexec, which a user would have to
// pass to every go test; and re-executing the whole go test under an
// overlay, which would build every package twice per run. The child route
// needs nothing from the user, and its build is cached on disk under a key
// that is the hash of the parent binary itself (see [Binary]): unchanged
// sources give an unchanged parent binary, and the second go test runs the
// cached child without building or rewriting anything.
//
// Where the child cannot be had (no go command, the sources are not where
// the binary was built from, -budgettest.control=off), the verdict is
// uncontrolled and the suite says so in one line; with
// -budgettest.control=require that is a failure instead.
//
// # Flags
//
// One family, read by every check and by the loop checks of package
// stress:
//
//   - -budgettest.control=auto|off|require: auto (the default) runs the
//     controlled stage in an instrumented child when the binary is not
//     instrumented itself; off runs free only and says so; require fails a
//     test whose verdict cannot be controlled.
//   - -budgettest.schedules=N: the schedules each scenario, stress run or
//     loop case explores under control (default 8; 0 runs free only).
//   - -budgettest.seed=N: the seed base of those schedules; the same base
//     explores the same schedules.
//   - -budgettest.replay=...: replays one scenario of the Linearizable
//     check exactly (the JSON a failure prints, or a saved .json fixture).
//   - -budgettest.instrument=patterns: more packages to rewrite,
//     comma-separated (import paths, or patterns go list understands).
//
// -stress.schedules and -stress.seed are deprecated spellings of
// -budgettest.schedules and -budgettest.seed, kept for one release.
package control

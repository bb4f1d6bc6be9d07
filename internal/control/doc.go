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
// One family, -budgettest.control, .schedules, .seed, .replay and
// .instrument, read by every check and by the loop checks of package
// stress, and described once, where users read it: the package doc of
// budgettest ("Controlled schedules on plain go test").
package control

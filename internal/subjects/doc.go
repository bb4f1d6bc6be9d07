// Package subjects is the one home of the budgets and loops the project's
// own checks are tested on, apart from the engine that judges them:
//
//   - mutants: deliberately broken budgets and loops, and the kill
//     matrices that put them through the suite;
//   - escapes: mutants of classes that once escaped every check, each with
//     a correct twin;
//   - wild: broken budgets written from the contract and the models alone,
//     without reading the checks;
//   - zoo: correct budgets of as many designs, which must pass;
//   - controltest: hand-instrumented budgets that test the controlled
//     checks under plain go test;
//   - ownloop: retry loops of a team's own, put behind the adapters.
//
// The subjects that play a team's module, with a go.mod of their own, are
// under testdata/ at the repository's root.
package subjects

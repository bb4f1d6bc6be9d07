// Package budgettest is the conformance suite for retry budgets and retry
// loops: the checks of this module, run on your implementation from your
// own tests, as a CI gate.
//
// Run checks a budget against the sequential model it claims to follow:
//
//   - Sequential: a rapid state machine applies random operations (and
//     clock steps) to the budget and to the model, and fails on the first
//     answer that differs, shrunk to a short sequence.
//   - Linearizable: concurrent histories recorded from the budget are
//     checked against the model with porcupine; a violation is minimized,
//     explained, and rendered to HTML under t.ArtifactDir().
//   - Race: many goroutines hammer the budget (run go test -race to make
//     this count), and the conservation invariant of the model's family is
//     checked from the log.
//   - Leak: no goroutine the budget started outlives it.
//   - Replay: fixed edge-case sequences (drains, long jumps of the clock,
//     fractions of a refill) replayed against the model.
//   - Amplification: a simulated 100% outage (package sim), in which the
//     budget may grant no more retries than its model does: it catches a
//     budget built per call site and a refund that keeps it from draining.
//
// RunLoop checks a retry loop, through a small adapter, against the ten
// promises of the stress package, each in a child process.
//
// Typical usage inside a test is
//
//	func TestMyBudget(t *testing.T) {
//		budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{
//			Name:  "mybudget",
//			Model: model.AWS(),
//			New: func(t *testing.T, clock budget.Clock) budget.Budget {
//				return mybudget.New(500)
//			},
//		})
//	}
//
// What it can and cannot prove. A failure is real: every check compares the
// budget with its model on something the budget actually did. A pass is
// evidence, not proof: the concurrent checks see only the interleavings
// that happened, so run under -race, with -count, on more than one core.
// A budget that deadlocks fails by a watchdog; its stuck goroutines are
// left behind. A budget that reads time.Now itself (Subject.WallClock) is
// checked inside testing/synctest bubbles, where time moves only when the
// test sleeps.
package budgettest

package stress_test

import (
	"flag"
	"testing"

	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/stress"
)

var loopReps = flag.Int("loop.reps", 20, "repetitions of the loop checks on budget.Retrier")

// The reference loop keeps every promise, every time.
func TestRetrierPassesLoopChecks(t *testing.T) {
	t.Parallel()
	for range *loopReps {
		for _, c := range stress.LoopChecks() {
			t.Run(c.Name, func(t *testing.T) {
				l := stress.RetrierLoop()
				if why, ok := l.Skip[c.Name]; ok {
					t.Skip(why)
				}
				c.Run(t, l)
			})
		}
		if t.Failed() {
			break
		}
	}
}

// budgettest.RunLoop isolates each check in a child process; the reference
// loop passes there too.
func TestRetrierPassesIsolatedLoopChecks(t *testing.T) {
	t.Parallel()
	budgettest.RunLoop(t, stress.RetrierLoop())
}

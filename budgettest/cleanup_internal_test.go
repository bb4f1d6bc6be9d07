package budgettest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/control"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
)

// cleanupMarkEnv names the directory a child of
// TestChildRunsTheTestsCleanups marks its cleanup in.
const cleanupMarkEnv = "BUDGETTEST_TEST_CLEANUP_MARK"

// A child runs the team's test up to the call it was started for; a test
// that starts a server (a Redis for a Remote budget, say) before the call
// starts it there too. Once the child has sent its outcome it ends the
// test, not the process, so the test's cleanups run and the server is
// stopped: the child exited at once before, and every go test -race of a
// Redis budget left redis-servers and temporary directories behind.
func TestChildRunsTheTestsCleanups(t *testing.T) {
	dir := os.Getenv(cleanupMarkEnv)
	if dir == "" {
		dir = t.TempDir()
		t.Setenv(cleanupMarkEnv, dir) // the child inherits it
	}
	mark := filepath.Join(dir, "cleaned")
	t.Cleanup(func() {
		if control.InChild() {
			os.WriteFile(mark, []byte("the child ran the test's cleanups\n"), 0o644)
		}
	})
	m := model.TokenBucket{Capacity: 1_000, TransientCost: 1_000, ThrottledCost: 500, SuccessBonus: 100}
	sub := Subject[model.TokenBucketState]{Name: "reference", Model: m, Scenarios: 2,
		New: func(*testing.T, budget.Clock) budget.Budget { return seqcheck.NewTokenBucket(m)(nil) }}
	c := enter(t)
	if c.skip {
		t.Fatal("the child was not started for this test's call")
	}
	sub, f := sub.prepare(t)
	if f != nil {
		t.Fatal(f)
	}
	if c.child != "" {
		sub.runChild(t, c)
		t.Fatal("runChild returned: the child's test went on after it sent its outcome")
	}
	prevReuse, prevSave := reuseSaved, saveOutcomes
	t.Cleanup(func() { reuseSaved, saveOutcomes = prevReuse, prevSave })
	reuseSaved, saveOutcomes = false, false // a child every time
	before := spawns.Load()
	if err := sub.controlledStage(t, c, CheckInvariant); err != nil {
		t.Fatal(err)
	}
	if spawns.Load() == before {
		t.Skip("no child was started (no instrumented binary here); nothing to see")
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("the child exited without running the test's cleanups: %v", err)
	}
}

package budgettest_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/wild"
	"github.com/retrybudget/retrybudget/model"
)

// replayCatches are the broken budgets of internal/wild that the Replay
// check catches on its own, every run (it is deterministic): their bugs
// are in the arithmetic of time, of slots and of large counts, which its
// fixed sequences (volume, ramp, fractions, slot boundaries and a
// nanosecond beside them, jumps beside overflow) are built to reach.
var replayCatches = []string{"wild.FloatDriftBucket", "wild.TruncatedRefillBucket", "wild.RoundedBonusBucket", "wild.FloatRatio",
	"wild.OverflowRefillBucket", "wild.SlotBoundaryRatio", "wild.InclusiveWindowRatio", "wild.ChargeOnDenyBucket", "wild.AtHalfThrottle",
	"wild.Uint16Ratio", "wild.Product32Ratio", "wild.TickRefillBucket", "wild.RoundedAllowanceRatio", "wild.ProportionalSlotRatio",
	"wild.WholeTokenCostBucket"}

func TestReplayCatchesArithmeticBugs(t *testing.T) {
	var caught []string
	for _, c := range wild.Cases() {
		if err := c.Check(t, budgettest.CheckReplay); err != nil {
			caught = append(caught, c.Name)
		}
	}
	t.Logf("caught by Replay: %q", caught)
	if !slices.Equal(caught, replayCatches) {
		t.Errorf("Replay caught %q, want %q", caught, replayCatches)
	}
}

// A budget that fails every replay is reported with its first three, not
// one and not all: enough to see a pattern, few enough to read.
func TestReplayReportsThreeFailures(t *testing.T) {
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{Name: "generous", Model: refill,
		New: func(*testing.T, budget.Clock) budget.Budget { return generous{} }}, budgettest.CheckReplay)
	if err == nil {
		t.Fatal("Replay passed a budget that grants every retry")
	}
	if n := strings.Count(err.Error(), "generous: replay \""); n != 3 {
		t.Errorf("%d replays reported, want 3:\n%v", n, err)
	}
}

package wild

import (
	"slices"
	"testing"

	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/race"
)

// replayCatches are the broken budgets of internal/subjects/wild that the Replay
// check catches on its own, every run (it is deterministic): their bugs
// are in the arithmetic of time, of slots and of large counts, which its
// fixed sequences (volume, ramp, fractions, slot boundaries and a
// nanosecond beside them, jumps beside overflow) are built to reach.
var replayCatches = []string{"wild.FloatDriftBucket", "wild.TruncatedRefillBucket", "wild.RoundedBonusBucket", "wild.FloatRatio",
	"wild.OverflowRefillBucket", "wild.SlotBoundaryRatio", "wild.InclusiveWindowRatio", "wild.ChargeOnDenyBucket", "wild.AtHalfThrottle",
	"wild.Uint16Ratio", "wild.Product32Ratio", "wild.TickRefillBucket", "wild.RoundedAllowanceRatio", "wild.ProportionalSlotRatio",
	"wild.WholeTokenCostBucket"}

func TestReplayCatchesArithmeticBugs(t *testing.T) {
	t.Parallel()
	if race.Enabled {
		t.Skip("bugs of arithmetic, which the race detector does not change: go test ./... checks them")
	}
	var caught []string
	for _, c := range Cases() {
		if err := c.Check(t, budgettest.CheckReplay); err != nil {
			caught = append(caught, c.Name)
		}
	}
	t.Logf("caught by Replay: %q", caught)
	if !slices.Equal(caught, replayCatches) {
		t.Errorf("Replay caught %q, want %q", caught, replayCatches)
	}
}

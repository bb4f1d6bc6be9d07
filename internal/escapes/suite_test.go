package escapes

import (
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

// TestIdleGapMutantsCaught: the mutants whose narrow counters of time wrap
// after a long idle gap fail the Replay check, at the gap where they wrap,
// on every run (the replays are fixed sequences).
func TestIdleGapMutantsCaught(t *testing.T) {
	for _, tt := range []struct {
		name, gap string
		verify    func(t *testing.T) error
	}{
		{"NarrowSlotTag", "idle gap of 2^16 slot widths", func(t *testing.T) error {
			return budgettest.VerifyCheck(t, budgettest.Subject[model.RatioState]{Name: "NarrowSlotTag", Model: NarrowSlotTagModel,
				New: func(_ *testing.T, c budget.Clock) budget.Budget { return NewNarrowSlotTag(NarrowSlotTagModel, c) }}, budgettest.CheckReplay)
		}},
		{"Tick32Bucket", "idle gap of 2^", func(t *testing.T) error {
			return budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{Name: "Tick32Bucket", Model: Tick32BucketModel,
				New: func(_ *testing.T, c budget.Clock) budget.Budget { return NewTick32Bucket(Tick32BucketModel, c) }}, budgettest.CheckReplay)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.verify(t)
			if err == nil {
				t.Fatal("passed the Replay check")
			}
			if !strings.Contains(err.Error(), tt.gap) {
				t.Errorf("the failure does not name the gap %q:\n%v", tt.gap, err)
			}
		})
	}
}

// TestGapTwinsPassTheSuite: the same designs with wide counters pass every
// check.
func TestGapTwinsPassTheSuite(t *testing.T) {
	t.Run("WideSlotTag", func(t *testing.T) {
		budgettest.Run(t, budgettest.Subject[model.RatioState]{Name: "WideSlotTag", Model: WideSlotTagModel,
			New: func(_ *testing.T, c budget.Clock) budget.Budget { return NewWideSlotTag(WideSlotTagModel, c) }})
	})
	t.Run("Tick64Bucket", func(t *testing.T) {
		budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{Name: "Tick64Bucket", Model: Tick64BucketModel,
			New: func(_ *testing.T, c budget.Clock) budget.Budget { return NewTick64Bucket(Tick64BucketModel, c) }})
	})
}

// TestCloseRaceCaught: the actor whose Close closes the channel calls send
// on fails the Leak check's race of calls against Close, on every run.
func TestCloseRaceCaught(t *testing.T) {
	t.Run("ActorCloseRace", func(t *testing.T) {
		sub := budgettest.Subject[model.TokenBucketState]{Name: "ActorCloseRace", Model: ActorCloseRaceModel,
			New: func(_ *testing.T, c budget.Clock) budget.Budget { return NewActorCloseRace(ActorCloseRaceModel, c) }}
		err := budgettest.VerifyCheck(t, sub, budgettest.CheckLeak)
		if err == nil {
			t.Fatal("passed the Leak check")
		}
		for _, want := range []string{"a call racing Close", "send on closed channel"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the failure lacks %q:\n%v", want, err)
			}
		}
	})
}

// TestActorSafeClosePassesTheSuite: the twin, whose calls racing Close
// return, passes every check.
func TestActorSafeClosePassesTheSuite(t *testing.T) {
	budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{Name: "ActorSafeClose", Model: ActorSafeCloseModel,
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return NewActorSafeClose(ActorSafeCloseModel, c) }})
}

package escapes

import (
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/race"
	"github.com/retrybudget/retrybudget/model"
)

// TestIdleGapMutantsCaught: the mutants whose narrow counters of time wrap
// after a long idle gap fail the Replay check, at the gap where they wrap,
// on every run (the replays are fixed sequences).
func TestIdleGapMutantsCaught(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	t.Run("WideSlotTag", func(t *testing.T) {
		t.Parallel()
		passesTheSuite(t, budgettest.Subject[model.RatioState]{Name: "WideSlotTag", Model: WideSlotTagModel,
			New: func(_ *testing.T, c budget.Clock) budget.Budget { return NewWideSlotTag(WideSlotTagModel, c) }})
	})
	t.Run("Tick64Bucket", func(t *testing.T) {
		t.Parallel()
		passesTheSuite(t, budgettest.Subject[model.TokenBucketState]{Name: "Tick64Bucket", Model: Tick64BucketModel,
			New: func(_ *testing.T, c budget.Clock) budget.Budget { return NewTick64Bucket(Tick64BucketModel, c) }})
	})
}

// TestCloseRaceCaught: the actor whose Close closes the channel calls send
// on fails the Leak check's race of calls against Close, on every run.
func TestCloseRaceCaught(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	passesTheSuite(t, budgettest.Subject[model.TokenBucketState]{Name: "ActorSafeClose", Model: ActorSafeCloseModel,
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return NewActorSafeClose(ActorSafeCloseModel, c) }})
}

// The keyed budgets, put through the suite as a team would put its own:
// budgettest.Keyed serves one key and makes the keys around it come and
// go, and the model is the rule of one key.
func evictFullQuotaSubject() budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{Name: "EvictFullQuota", Model: EvictFullQuotaModel,
		New: budgettest.Keyed(2, func(_ *testing.T, c budget.Clock) func(string) budget.Budget {
			return NewEvictFullQuota(EvictFullQuotaModel, 2, c).Budget
		})}
}

func safeKeyedSubject() budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{Name: "SafeKeyed", Model: SafeKeyedModel,
		New: budgettest.Keyed(2, func(_ *testing.T, c budget.Clock) func(string) budget.Budget {
			return NewSafeKeyed(SafeKeyedModel, 2, c).Budget
		})}
}

func inFlightSubject(name string, budgetOf func(clock budget.Clock) func(string) budget.InFlightBudget) budgettest.Subject[model.InFlightState] {
	return budgettest.Subject[model.InFlightState]{Name: name, Model: SafeKeyedInFlightModel,
		New: budgettest.Keyed(2, func(_ *testing.T, c budget.Clock) func(string) budget.Budget {
			of := budgetOf(c)
			return func(key string) budget.Budget { return of(key) }
		})}
}

// TestKeyedMutantsCaught: a keyed budget that drops a full quota a call
// still holds fails the suite (Linearizable and Invariant: the dropped
// charge shows as a retry too many); one that drops an idle key with calls
// in flight fails Replay, whose idle gaps hold calls in flight.
func TestKeyedMutantsCaught(t *testing.T) {
	t.Parallel()
	t.Run("EvictFullQuota", func(t *testing.T) {
		err := budgettest.VerifyCheck(t, evictFullQuotaSubject(), budgettest.CheckInvariant)
		if err == nil {
			t.Fatal("passed the Invariant check")
		}
		t.Log(firstLine(err))
	})
	t.Run("EvictIdleInFlight", func(t *testing.T) {
		sub := inFlightSubject("EvictIdleInFlight", func(c budget.Clock) func(string) budget.InFlightBudget {
			return NewEvictIdleInFlight(EvictIdleInFlightModel, KeyedIdleTimeout, c).Budget
		})
		err := budgettest.VerifyCheck(t, sub, budgettest.CheckReplay)
		if err == nil {
			t.Fatal("passed the Replay check")
		}
		if !strings.Contains(err.Error(), "calls in flight across an idle gap of 1m0s and 1s") {
			t.Errorf("the failure does not name the one-minute gap with calls in flight:\n%v", err)
		}
	})
}

// TestKeyedMutantCaughtByLinearizable: the dropped charge also breaks
// linearizability, found by the checks' default stages.
func TestKeyedMutantCaughtByLinearizable(t *testing.T) {
	t.Parallel()
	if err := budgettest.VerifyCheck(t, evictFullQuotaSubject(), budgettest.CheckLinearizable); err == nil {
		t.Fatal("passed the Linearizable check")
	}
}

// TestKeyedTwinsPassTheSuite: the twins, which drop only what no call
// holds, pass every check with their keys coming and going.
func TestKeyedTwinsPassTheSuite(t *testing.T) {
	t.Parallel()
	t.Run("SafeKeyed", func(t *testing.T) {
		t.Parallel()
		passesTheSuite(t, safeKeyedSubject())
	})
	t.Run("SafeKeyedInFlight", func(t *testing.T) {
		t.Parallel()
		passesTheSuite(t, inFlightSubject("SafeKeyedInFlight", func(c budget.Clock) func(string) budget.InFlightBudget {
			return NewSafeKeyedInFlight(SafeKeyedInFlightModel, KeyedIdleTimeout, c).Budget
		}))
	})
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// deepSuiteSubject is one of deep.go's budgets as a team would put it through
// the suite.
func deepSuiteSubject(name string, m model.TokenBucket, newB func(model.TokenBucket) budget.Budget) budgettest.Subject[model.TokenBucketState] {
	return budgettest.Subject[model.TokenBucketState]{Name: name, Model: m,
		New: func(_ *testing.T, _ budget.Clock) budget.Budget { return newB(m) }}
}

// TestDeepMutantsCaught: the mutants whose bug needs one call preempted
// three times fail the Linearizable check in its exhaustive stage, at three
// preemptions inside calls; the ABAs, which need three and four
// goroutines, fail it there at two. On every run: the stage's schedules are the same on every
// run.
func TestDeepMutantsCaught(t *testing.T) {
	t.Parallel()
	if race.Enabled {
		t.Skip("found by the exhaustive stage, in the controlled stage's child, which is built without the race detector: under -race the same child ran the same schedules again; go test ./... checks it")
	}
	for _, tt := range []struct {
		sub   budgettest.Subject[model.TokenBucketState]
		where string
	}{
		{deepSuiteSubject("SpinThenStore", SpinThenStoreModel, func(m model.TokenBucket) budget.Budget { return NewSpinThenStore(m) }),
			"found by the exhaustive stage (every schedule with at most 3 preemptions inside calls)"},
		{deepSuiteSubject("SplitSeqlock", SplitSeqlockModel, func(m model.TokenBucket) budget.Budget { return NewSplitSeqlock(m) }),
			"found by the exhaustive stage (every schedule with at most 3 preemptions inside calls)"},
		{deepSuiteSubject("ABAStack", ABAStackModel, func(m model.TokenBucket) budget.Budget { return NewABAStack(m) }),
			"found by the exhaustive stage (every schedule with at most 2 preemptions), scenario \"new, four goroutines"},
		{deepSuiteSubject("ABAPool", ABAPoolModel, func(model.TokenBucket) budget.Budget { return NewABAPool(nil) }),
			"found by the exhaustive stage (every schedule with at most 2 preemptions), scenario \"one token taken, three goroutines"},
	} {
		t.Run(tt.sub.Name, func(t *testing.T) {
			err := budgettest.VerifyCheck(t, tt.sub, budgettest.CheckLinearizable)
			if err == nil {
				t.Fatal("passed the Linearizable check")
			}
			if !strings.Contains(err.Error(), tt.where) {
				t.Errorf("not %s:\n%v", tt.where, err)
			}
		})
	}
}

// TestDeepTwinsPassTheSuite: their twins, whose slow paths write with a
// compare-and-swap or inside the packed word's version, and whose stack's
// head carries a tag, pass every check.
func TestDeepTwinsPassTheSuite(t *testing.T) {
	t.Parallel()
	for _, sub := range []budgettest.Subject[model.TokenBucketState]{
		deepSuiteSubject("SpinThenCAS", SpinThenCASModel, func(m model.TokenBucket) budget.Budget { return NewSpinThenCAS(m) }),
		deepSuiteSubject("PackedSeqlock", PackedSeqlockModel, func(m model.TokenBucket) budget.Budget { return NewPackedSeqlock(m) }),
		deepSuiteSubject("TaggedStack", TaggedStackModel, func(m model.TokenBucket) budget.Budget { return NewTaggedStack(m) }),
		deepSuiteSubject("TaggedPool", TaggedPoolModel, func(model.TokenBucket) budget.Budget { return NewTaggedPool(nil) }),
	} {
		t.Run(sub.Name, func(t *testing.T) {
			t.Parallel()
			passesTheSuite(t, sub)
		})
	}
}

// passesTheSuite runs the whole suite on sub, a correct design of this
// package, as a team would. Under -race it runs the Race check only, the
// one whose verdict the detector can change on a design of mutexes,
// channels and atomics: the others' verdicts are go test ./...'s (their
// controlled stages run in a child built without the detector, and their
// free runs under it ran the same checks five to ten times slower).
func passesTheSuite[S any](t *testing.T, sub budgettest.Subject[S]) {
	t.Helper()
	if !race.Enabled {
		budgettest.Run(t, sub)
		return
	}
	if err := budgettest.VerifyCheck(t, sub, budgettest.CheckRace); err != nil {
		t.Errorf("under -race: %v", err)
	}
}

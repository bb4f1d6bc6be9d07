package thirdparty

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

// A subject is one library's adapter with the model it is checked against,
// its state type erased so that subjects of every model fit in one table,
// and what the suite says of it, check by check.
type subject struct {
	name  string
	check func(t *testing.T, c budgettest.Check) error
	// fails pins the checks that fail, each with the text its failure
	// must contain (the rule first) and where the failure is argued.
	// Every check in neither fails nor unpinned must pass.
	fails map[budgettest.Check]failure
	// unpinned are checks whose verdict is logged and not asserted: a
	// suspected false alarm of the suite, with why. Not pinned as passing
	// or failing, until the suite is fixed.
	unpinned map[budgettest.Check]string
}

// A failure pinned: the failure text must contain every string of has.
type failure struct {
	has []string
	why string
}

func subjectOf[S any](sub budgettest.Subject[S]) subject {
	return subject{
		name:  sub.Name,
		check: func(t *testing.T, c budgettest.Check) error { return budgettest.VerifyCheck(t, sub, c) },
	}
}

// The rules, as the suite names them.
const (
	ruleSequential   = "every answer equals the model's when the operations run one at a time"
	ruleLinearizable = "every concurrent history has an order, consistent with real time, that the model accepts"
	ruleInvariant    = "under contention the budget"
)

// verdicts runs every check on s, one at a time with VerifyCheck, and
// holds each verdict to what s pins. The controlled stages are required,
// so that no verdict rests on a stage that did not run.
func verdicts(t *testing.T, s subject) {
	if err := flag.Set("budgettest.control", "require"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flag.Set("budgettest.control", "auto") })
	// x/time's Sequential failure is pinned: keep rapid's fail files for it
	// out of the tree (.gitignore has them too).
	if flag.Lookup("rapid.nofailfile") != nil {
		if err := flag.Set("rapid.nofailfile", "true"); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range budgettest.Checks() {
		start := time.Now()
		err := s.check(t, c)
		took := time.Since(start).Round(time.Millisecond)
		first := "pass"
		if err != nil {
			first, _, _ = strings.Cut(err.Error(), "\n")
		}
		if why, ok := s.unpinned[c]; ok {
			if err != nil {
				first = "failed:\n" + err.Error()
			}
			t.Logf("%s (%v): NOT PINNED, exposed to a suspected false alarm of the suite (%s): %s", c, took, why, first)
			continue
		}
		f, fails := s.fails[c]
		switch {
		case !fails && err == nil:
			t.Logf("%s (%v): pass", c, took)
		case !fails:
			t.Errorf("%s (%v): failed, want pass:\n%v", c, took, err)
		case err == nil:
			t.Errorf("%s (%v): passed, want the failure pinned (%s)", c, took, f.why)
		default:
			for _, h := range f.has {
				if !strings.Contains(err.Error(), h) {
					t.Errorf("%s (%v): the failure does not contain %q:\n%v", c, took, h, err)
				}
			}
			t.Logf("%s (%v): fails as pinned: %s\n%v", c, took, first, err)
		}
	}
}

// xTimeRateSubject is golang.org/x/time/rate v0.16.0 under XTimeRateModel, the
// exact token bucket rate.NewLimiter(10, 10) documents.
//
// Sequential, Invariant and Linearizable fail, all three on x/time's
// rounding, a real property of the library and no false alarm:
// reserveN (rate.go:337–381) grants when the wait for the missing part of
// a token is zero, and durationFromTokens (rate.go:405–418) truncates that
// wait to a whole nanosecond, in float64, so Allow() grants a retry when
// the bucket holds less than one token, up to a nanosecond of refill
// short (1e-8 token at 10 a second); the exact model denies it. The suite's
// shrunk witnesses are that edge: the Sequential one ends at 99.999999 ms
// with 0.99999999 tokens (TestXTimeRateSuiteCounterexample replays it with
// explicit instants), the Invariant one is a retry "called alone" at
// tokens=0.999 in a burst run, and the Linearizable one (a history of
// the "pre" goroutine alone, so a sequential one, found by the random
// controlled stage in the bubble) ends the same way at 99.999999 ms; only
// the rule is pinned for it, as the history that shows it may differ.
// TestXTimeRateRounding shows that these are the only
// differences: over 2000 random sequences, x/time's answers equal those of
// its own float arithmetic (XTimeFloatModel) every time, and every answer
// where it parts from the exact bucket is a grant at most a nanosecond of
// refill early.
//
// The concurrency bug (Allow reads time.Now before taking the lock, and a
// grant moves last back) is real too, but the rounding hides it here: the
// Linearizable check stops at the first history it cannot order, and the
// rounding makes one first. xTimeFloatSubject shows it alone, and
// TestXTimeRateStaleNow pins it deterministically.
//
// Edges passes by being skipped: a wall-clock budget's clock cannot be set.
func xTimeRateSubject() subject {
	s := subjectOf(budgettest.Subject[model.TokenBucketState]{
		Name:      "golang.org/x/time/rate v0.16.0, NewLimiter(10, 10), Allow",
		Model:     XTimeRateModel,
		New:       func(*testing.T, budget.Clock) budget.Budget { return NewXTimeRate() },
		WallClock: true,
	})
	rounding := "x/time grants with less than a token, up to a nanosecond of refill short: see xTimeRateSubject and TestXTimeRateRounding"
	s.fails = map[budgettest.Check]failure{
		budgettest.CheckSequential:   {has: []string{ruleSequential, "granted, want denied"}, why: rounding},
		budgettest.CheckLinearizable: {has: []string{ruleLinearizable}, why: rounding},
		budgettest.CheckInvariant:    {has: []string{ruleInvariant, "was granted, but the model denied it"}, why: rounding},
	}
	return s
}

// xTimeFloatSubject is the same limiter under XTimeFloatModel, x/time's own
// float64 arithmetic one call at a time, with the forward-only clock: the
// model a team writes to ask the suite about x/time's concurrency alone,
// once the exact bucket has shown only rounding.
//
// Linearizable fails, and it is the bug the maintainers reported, a real
// property of x/time/rate v0.16.0:
//
//   - Allow() is AllowN(time.Now(), 1) (rate.go:109–111): the instant is
//     read before reserveN takes lim.mu (rate.go:337–339), so a call can be
//     delayed between its reading and the lock while other calls run.
//   - advance (rate.go:387–401) treats a t before lim.last as lim.last: the
//     delayed call refills nothing and is granted from what is there.
//   - but on a grant reserveN stores lim.last = t (rate.go:375), the stale
//     instant: last moves back, and the next call refills the interval
//     from t to the present a second time.
//
// The suite's witness shows exactly that: a goroutine's retry(throttled)
// is preempted at rate.go:338 (lim.mu.Lock(), its time.Now already read),
// the clock goroutine moves the clock on by seconds, other goroutines
// take tokens at the new instant, the stale retry resumes and is granted,
// and the calls after it are granted more than the 10 tokens the bucket
// can hold at that instant ("the model answers denied").
// TestXTimeRateStaleNow makes the same interleaving with AllowN at
// explicit instants: 12 grants where every order allows 10. Only the rule
// is pinned, not the witness.
//
// Sequential passes: the float model is x/time's arithmetic, so the
// rounding that fails xTimeRateSubject is in the model here.
func xTimeFloatSubject() subject {
	s := subjectOf(budgettest.Subject[XTimeFloatState]{
		Name:      "golang.org/x/time/rate v0.16.0, NewLimiter(10, 10), Allow, under its float arithmetic",
		Model:     XTimeFloatModel{Limit: 10, Burst: 10},
		New:       func(*testing.T, budget.Clock) budget.Budget { return NewXTimeRate() },
		WallClock: true,
	})
	s.fails = map[budgettest.Check]failure{
		budgettest.CheckLinearizable: {
			has: []string{ruleLinearizable},
			why: "Allow reads time.Now before the lock, and a grant stores the stale instant as last: see xTimeFloatSubject",
		},
	}
	return s
}

// jujuModel is the bucket the juju subject builds: 10 tokens, 2 at every
// tick of 100 ms (20 a second), so that a tick pays for two retries and
// where the clock is inside a tick matters.
var jujuModel = JujuModel{FillInterval: 100 * time.Millisecond, Capacity: 10, Quantum: 2}

// jujuSubject is github.com/juju/ratelimit v1.0.2 (a module with no go.mod, the
// suite copies and rewrites it all the same) on the suite's clock, under
// JujuModel, its tick rule, backward steps included. It passes every
// check: TakeAvailable reads the clock and updates the bucket under one
// mutex (ratelimit.go:221–242), so every call is one step of the rule at
// the reading it takes. The suite does check the model's tick rule, not
// just the answers it happens to draw: with the model deliberately made
// forward-only, or with currentTick's truncation toward zero made a floor,
// or with time.Time.Sub's saturation left out, the suite fails the same
// bucket (Sequential, Linearizable and Edges; Linearizable; Edges,
// respectively).
func jujuSubject() subject {
	return subjectOf(budgettest.Subject[JujuState]{
		Name:  "github.com/juju/ratelimit v1.0.2, NewBucketWithQuantumAndClock(100ms, 10, 2), TakeAvailable(1)",
		Model: jujuModel,
		New:   func(_ *testing.T, c budget.Clock) budget.Budget { return NewJuju(jujuModel, c) },
	})
}

// throttledSubject is github.com/throttled/throttled/v2 v2.15.0's GCRA limiter on
// its in-memory store, as its README builds it, under ThrottledModel, the
// token bucket GCRA with PerSec(10) and MaxBurst 9 is.
//
// Sequential, Replay and the rest pass: GCRA in integer nanoseconds is the
// exact token bucket, to the nanosecond.
//
// Linearizable fails, and the failure is throttled's, a real property of
// v2.15.0, though a conservative one (a retry denied, never one granted
// too many): GetWithTime reads the clock first (memstore.go:67, now :=
// ms.timeNow()) and loads the stored theoretical arrival time after
// (memstore.go:68–74), outside any lock common to both; RateLimitCtx then
// decides with that now against that tat (rate.go:197–233). A call that
// read the clock at t_a and loaded tat after other calls had taken tokens
// at a later t_b decides at t_a on their grants: with tat = t_b + k·T
// (k tokens taken at t_b), newTat − t_a = t_b − t_a + (k+1)·T exceeds the
// tolerance of 10·T as soon as k = 9, and the call is denied although a
// token is left. No order explains it: before those grants the bucket was
// full, after them it held a token. TestThrottledStaleRead makes that
// interleaving deterministically. The suite's witness is of that shape on
// most runs: a retry spanning another goroutine's grants, denied while the
// model holds a token, found by the exhaustive stage, which runs a
// wall-clock budget in a bubble of its own. In the bubble the readings are
// equal unless a clock step falls between them; the random stage finds
// that too when it can preempt there (a call that read the clock at 0,
// preempted while the clock moved 964 ms and another call was granted, is
// denied: it decides at 0 on the later call's tat). Once in the runs here
// the witness was instead an 11th grant at "now=0s", the real clock
// having moved 153 ms in that schedule: the suite's artifact, not
// throttled's. So only the rule is pinned, not the witness: the verdict
// is right (TestThrottledStaleRead), whichever history shows it.
func throttledSubject() subject {
	s := subjectOf(budgettest.Subject[model.TokenBucketState]{
		Name:      "github.com/throttled/throttled/v2 v2.15.0, GCRA PerSec(10) MaxBurst 9, memstore",
		Model:     ThrottledModel,
		New:       func(*testing.T, budget.Clock) budget.Budget { return NewThrottled() },
		WallClock: true,
	})
	s.fails = map[budgettest.Check]failure{
		budgettest.CheckLinearizable: {
			has: []string{ruleLinearizable},
			why: "GetWithTime reads the clock before it loads the state: see throttledSubject",
		},
	}
	return s
}

// calibrationSubject is a wall-clock budget that is correct by
// construction (see wallModelBucket) under the same model as
// xTimeRateSubject: every check must pass it. (It showed that the
// Invariant check's stress runs and the exhaustive stage once ran a
// wall-clock budget on the real clock, outside the bubble: a false alarm
// of the suite, fixed since.)
func calibrationSubject() subject {
	s := subjectOf(budgettest.Subject[model.TokenBucketState]{
		Name:      "calibration: XTimeRateModel under a mutex on the wall clock",
		Model:     XTimeRateModel,
		New:       func(*testing.T, budget.Clock) budget.Budget { return newWallModelBucket(XTimeRateModel) },
		WallClock: true,
	})
	return s
}

func TestXTimeRateVerdicts(t *testing.T)   { verdicts(t, xTimeRateSubject()) }
func TestXTimeFloatVerdicts(t *testing.T)  { verdicts(t, xTimeFloatSubject()) }
func TestJujuVerdicts(t *testing.T)        { verdicts(t, jujuSubject()) }
func TestThrottledVerdicts(t *testing.T)   { verdicts(t, throttledSubject()) }
func TestCalibrationVerdicts(t *testing.T) { verdicts(t, calibrationSubject()) }

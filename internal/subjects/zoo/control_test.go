package zoo

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/sched"
)

var controlOnly = flag.String("control.only", "", "comma-separated zoo budgets (RWBucket, ...) TestControlledPasses runs; empty: all")

var controlRuns = flag.Int("control.runs", 0, "how many runs, each with a fresh -budgettest.seed, TestControlledPasses makes of the Linearizable check on every zoo budget (0: skipped; needs the code instrumented by cmd/budgetcheck)")

// check runs one check of the suite on a zoo subject.
type check func(t *testing.T, c budgettest.Check) error

func checkOf[S any](sub budgettest.Subject[S]) check {
	return func(t *testing.T, c budgettest.Check) error { return budgettest.VerifyCheck(t, sub, c) }
}

// TestControlledPasses measures, for every zoo budget, that the
// Linearizable check passes in every one of -control.runs runs under
// control, each run from its own seed base:
//
//	go run ./cmd/budgetcheck -run TestControlledPasses -control.runs=100 ./internal/subjects/zoo
func TestControlledPasses(t *testing.T) {
	if *controlRuns <= 0 {
		t.Skip("a measurement: run with -control.runs=N through cmd/budgetcheck")
	}
	if !sched.Instrumented() {
		t.Fatal("the code is not instrumented: run this test through cmd/budgetcheck")
	}
	seed := flag.Lookup("budgettest.seed")
	defer seed.Value.Set(seed.Value.String())
	subjects := map[string]check{
		"RWBucket": checkOf(rwBucketSubject()), "CASBucket": checkOf(casBucketSubject()), "RefillBucket": checkOf(refillBucketSubject()),
		"RingRatio": checkOf(ringRatioSubject()), "ActorThrottle": checkOf(actorThrottleSubject()), "SnapBucket": checkOf(snapBucketSubject()),
		"SeqlockBucket": checkOf(seqlockBucketSubject()), "FloatBucket": checkOf(floatBucketSubject()),
		"MutexInFlight": checkOf(mutexInFlightSubject()), "PackedInFlight": checkOf(packedInFlightSubject()),
		"ActorInFlight": checkOf(actorInFlightSubject()), "FailsafeRuleInFlight": checkOf(failsafeRuleInFlightSubject()),
	}
	for _, name := range []string{"RWBucket", "CASBucket", "RefillBucket", "RingRatio", "ActorThrottle", "SnapBucket", "SeqlockBucket", "FloatBucket",
		"MutexInFlight", "PackedInFlight", "ActorInFlight", "FailsafeRuleInFlight"} {
		if *controlOnly != "" && !slices.Contains(strings.Split(*controlOnly, ","), name) {
			continue
		}
		passed, start := 0, time.Now()
		for i := range *controlRuns {
			seed.Value.Set(fmt.Sprint(i + 1))
			if err := subjects[name](t, budgettest.CheckLinearizable); err != nil {
				t.Errorf("%s, seed base %d: %v", name, i+1, err)
				continue
			}
			passed++
		}
		t.Logf("zoo.%-20s passed %d/%d (%v a run)", name, passed, *controlRuns, (time.Since(start) / time.Duration(*controlRuns)).Round(time.Millisecond))
	}
}

package failsafe

import (
	"context"
	"errors"
	"flag"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	fsbudget "github.com/failsafe-go/failsafe-go/budget"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

func subject() budgettest.Subject[model.InFlightState] {
	return budgettest.Subject[model.InFlightState]{
		Name:  "failsafe-go budget v0.9.8",
		Model: model.FailsafeDefaults(),
		New:   func(t *testing.T, _ budget.Clock) budget.Budget { return inFlight{newPermits(t)} },
	}
}

var (
	counterexample = regexp.MustCompile(`the counterexample, (\d+) operations:`)
	minimized      = regexp.MustCompile(`(\d+) operations(?: in |; no smaller)`)
)

// TestFailsafeVerdicts pins what the suite says of failsafe-go's budget,
// through the adapter its own retry executor amounts to: it follows its
// rule one call at a time (Model, Sequential, Replay pass), but the
// check-then-act in TryAcquirePermit (a load of the retries in flight, a
// compare, then an add) grants two retries where its rule admits one.
//
// The Linearizable check finds it on every run, in its controlled stage:
// plain go test rewrites failsafe-go's budget package (found from the
// adapter's field, in the module cache) in a copy, runs the stage in an
// instrumented child, and prints the flag that replays the schedule. The
// Race and Invariant checks' free stress runs find it too, most runs
// (79 of 80 under -race here); their verdicts are logged, not pinned.
func TestFailsafeVerdicts(t *testing.T) {
	// The verdict pinned here must be the controlled one.
	if err := flag.Set("budgettest.control", "require"); err != nil {
		t.Fatal(err)
	}
	defer flag.Set("budgettest.control", "auto")
	for _, c := range budgettest.Checks() {
		err := budgettest.VerifyCheck(t, subject(), c)
		switch c {
		case budgettest.CheckRace, budgettest.CheckInvariant:
			if err == nil {
				t.Logf("%s: pass (its free runs missed the check-then-act this time)", c)
				continue
			}
			msg := err.Error()
			if !strings.Contains(msg, "were granted, where every order of those calls grants") {
				t.Errorf("%s failed, but not on a grant no order explains:\n%v", c, err)
				continue
			}
			if m := counterexample.FindStringSubmatch(msg); m != nil {
				t.Logf("%s: a counterexample of %s operations:\n%s", c, m[1], msg[strings.Index(msg, "with "):])
			}
		case budgettest.CheckLinearizable:
			if err == nil {
				t.Errorf("%s passed: the check-then-act in TryAcquirePermit went unseen under control", c)
				continue
			}
			msg := err.Error()
			if !strings.Contains(msg, "replay it with: -budgettest.replay=") {
				t.Errorf("%s failed without a controlled schedule to replay:\n%v", c, err)
			}
			m := minimized.FindStringSubmatch(msg)
			if m == nil {
				t.Errorf("%s: no minimized witness in:\n%v", c, err)
				continue
			}
			if n, _ := strconv.Atoi(m[1]); n > 10 {
				t.Errorf("%s: the witness has %d operations, more than 10:\n%v", c, n, err)
			}
			t.Logf("%s: %v", c, err)
		default:
			if err != nil {
				t.Errorf("%s: %v", c, err)
			}
		}
	}
}

func firstLine(err error) string {
	if err == nil {
		return "pass"
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// The adapter a new user writes first, with budget.Budget's three methods,
// hears of an end only from a success: every call that fails leaks its
// execution, every retry that fails its permit, and after the failures
// stop nothing brings them back. Through the in-flight adapter the same
// calls leave nothing behind.
func TestNaiveAdapterLeaks(t *testing.T) {
	run := func(b budget.Budget) (retried int, rate float64) {
		r := budget.Retrier{Budget: b, MaxAttempts: 2, Jitter: func(time.Duration) time.Duration { return 0 }}
		for range 100 { // an outage: every attempt fails
			attempts := 0
			_ = r.Do(context.Background(), func(context.Context, budget.Attempt) error {
				attempts++
				return errors.New("unavailable")
			})
			if attempts == 2 {
				retried++
			}
		}
		for range 1000 { // recovery: every call succeeds at once
			_ = r.Do(context.Background(), func(context.Context, budget.Attempt) error { return nil })
		}
		return retried, b.(interface{ permits() permits }).permits().(fsbudget.Budget).Rate()
	}
	naiveRetried, naiveRate := run(naive{newPermits(t)})
	retried, rate := run(inFlight{newPermits(t)})
	t.Logf("naive adapter: %d of 100 failing calls retried, Rate() %.3f after recovery, with nothing in flight", naiveRetried, naiveRate)
	t.Logf("in-flight adapter: %d of 100 failing calls retried, Rate() %.3f after recovery", retried, rate)
	if naiveRate == 0 {
		t.Error("the naive adapter leaked nothing")
	}
	if rate != 0 || retried != 100 {
		t.Errorf("the in-flight adapter: %d of 100 retried and Rate() %v after every call ended, want 100 and 0", retried, rate)
	}
	// The suite turns the naive adapter away: a model of work in flight
	// needs a budget that hears of ends.
	sub := subject()
	sub.New = func(t *testing.T, _ budget.Clock) budget.Budget { return naive{newPermits(t)} }
	if err := budgettest.Verify(t, sub); err == nil || !strings.Contains(err.Error(), "is not a budget.InFlightBudget") {
		t.Errorf("Verify = %v, want the subject turned away", err)
	}
}

package failsafe

import (
	"context"
	"errors"
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

var counterexample = regexp.MustCompile(`the counterexample, (\d+) operations:`)

// TestFailsafeVerdicts pins what the suite says of failsafe-go's budget,
// through the adapter its own retry executor amounts to: it follows its
// rule one call at a time (Model, Sequential, Replay pass), but the
// check-then-act in TryAcquirePermit (a load of the retries in flight, a
// compare, then an add) grants two retries where its rule admits one, and
// the Race and Invariant checks find that (79 of 80 runs under -race here), minimized to the
// fewest calls in flight. Linearizable finds it too, on the runs where two
// of its goroutines meet inside TryAcquirePermit; its verdict is logged,
// not pinned.
func TestFailsafeVerdicts(t *testing.T) {
	for _, c := range budgettest.Checks() {
		err := budgettest.VerifyCheck(t, subject(), c)
		switch c {
		case budgettest.CheckRace, budgettest.CheckInvariant:
			if err == nil {
				t.Errorf("%s passed: the check-then-act in TryAcquirePermit went unseen", c)
				continue
			}
			msg := err.Error()
			if !strings.Contains(msg, "were granted, where every order of those calls grants") {
				t.Errorf("%s failed, but not on a grant no order explains:\n%v", c, err)
				continue
			}
			m := counterexample.FindStringSubmatch(msg)
			if m == nil {
				t.Errorf("%s: no counterexample in:\n%v", c, err)
				continue
			}
			n, _ := strconv.Atoi(m[1])
			t.Logf("%s: a counterexample of %d operations:\n%s", c, n, msg[strings.Index(msg, "with "):])
			if n > 6 {
				t.Errorf("%s: the counterexample has %d operations, more than 6", c, n)
			}
		case budgettest.CheckLinearizable:
			t.Logf("%s: %v", c, firstLine(err))
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

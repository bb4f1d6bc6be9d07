package budgettest_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

// The port of tower's TpsBudget and the model of its intended rule are in
// example_model_test.go, the worked example of writing a model.

// tpsSubject is the port of TpsBudget::new(1s, 1, retryPercent) checked
// against the rule it documents.
func tpsSubject(retryPercent float32) budgettest.Subject[tpsState] {
	return budgettest.Subject[tpsState]{
		Name:  "tower TpsBudget(1s, 1, " + strconv.FormatFloat(float64(retryPercent), 'g', -1, 32) + ")",
		Model: tpsIntended(time.Second, 1, retryPercent),
		New: func(_ *testing.T, clock budget.Clock) budget.Budget {
			return newTpsBudget(time.Second, 1, retryPercent, clock)
		},
	}
}

// tpsGrants makes requests first attempts at one instant, then asks for
// retries until the first denial, on the port and on the model, and
// returns how many each granted.
func tpsGrants(retryPercent float32, requests int) (byPort, byModel int) {
	port := newTpsBudget(time.Second, 1, retryPercent, new(budget.ManualClock))
	m := tpsIntended(time.Second, 1, retryPercent)
	s := m.Init()
	for range requests {
		port.Request()
		s, _ = m.Step(s, model.OpRequest)
	}
	for port.Retry(budget.Transient) {
		byPort++
	}
	for granted := true; granted; {
		if s, granted = m.Step(s, model.OpRetry(model.Transient)); granted {
			byModel++
		}
	}
	return byPort, byModel
}

// tower#857: TpsBudget truncates 1/retry_percent to an integer withdrawal,
// so retry_percent 0.3 withdraws 3 per retry and allows one retry per 3
// requests, 33% instead of 30%. The sequential check finds it as a retry
// the port grants and the model denies.
func TestTowerRetryPercentTruncation(t *testing.T) {
	t.Parallel()
	t.Run("Measured", func(t *testing.T) {
		// 1000 requests at one instant, on top of a reserve of
		// min_per_sec × ttl = 1 retry.
		for _, c := range []struct {
			pct             float32
			byPort, byModel int
		}{
			{0.3, 333 + 1, 300 + 1}, // the bug: 33.3% where 30% is meant
			{0.25, 250 + 1, 250 + 1},
			{0.5, 500 + 1, 500 + 1},
			{0.6, 1000 + 1, 600 + 1}, // #857's own example: 1/0.6 truncates to 1
			{0.2, 200 + 1, 200 + 1},  // tower's default: 1/0.2 is 5 in float32 too
			{3, 3003 + 1, 3000 + 1},  // above 1: 1000/3 truncates to 333
		} {
			byPort, byModel := tpsGrants(c.pct, 1000)
			t.Logf("retry_percent %v, 1000 requests: port grants %d retries, model %d", c.pct, byPort, byModel)
			if byPort != c.byPort || byModel != c.byModel {
				t.Errorf("tpsGrants(%v, 1000) = %d, %d; want %d, %d", c.pct, byPort, byModel, c.byPort, c.byModel)
			}
		}
	})

	t.Run("SequentialFindsIt", func(t *testing.T) {
		err := budgettest.VerifyCheck(t, tpsSubject(0.3), budgettest.CheckSequential)
		var f *budgettest.Failure
		if !errors.As(err, &f) {
			t.Fatalf("VerifyCheck(retry_percent 0.3, Sequential) = %v, want a *budgettest.Failure", err)
		}
		t.Logf("the failure:\n%v", f)
		// The shrunk counterexample ends on a retry the port grants and
		// the model denies: the port grants more, never less.
		if !strings.Contains(f.Detail, "= granted, want denied") {
			t.Errorf("the failure does not show a retry granted that the model denies:\n%v", f)
		}
		if strings.Contains(f.Detail, "= denied, want granted") {
			t.Errorf("the failure shows the port denying what the model grants:\n%v", f)
		}
	})
}

// The configurations where 1/retry_percent is an integer: the port of
// TpsBudget passes every check against the model of its intended rule.
func TestTowerTpsBudgetConforms(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	budgettest.Run(t, tpsSubject(0.25))
}

// The port passes tower's own unit tests of TpsBudget (tps_empty,
// tps_leaky, tps_slots and tps_reserve in tps_budget.rs), with tokio's
// paused clock as a ManualClock.
func TestTowerPortPassesTowersTests(t *testing.T) {
	t.Parallel()
	retry := func(b *tpsBudget) bool { return b.Retry(budget.Transient) }
	t.Run("Empty", func(t *testing.T) {
		if b := newTpsBudget(time.Second, 0, 1, new(budget.ManualClock)); retry(b) {
			t.Error("a retry granted before any deposit")
		}
	})
	t.Run("Leaky", func(t *testing.T) {
		clock := new(budget.ManualClock)
		b := newTpsBudget(time.Second, 0, 1, clock)
		b.Request()
		clock.Advance(3 * time.Second)
		if retry(b) {
			t.Error("a deposit 3s old, with a ttl of 1s, still paid for a retry")
		}
	})
	t.Run("Slots", func(t *testing.T) {
		clock := new(budget.ManualClock)
		b := newTpsBudget(time.Second, 0, 0.5, clock)
		b.Request()
		b.Request()
		clock.Advance(901 * time.Millisecond)
		if !retry(b) {
			t.Error("two deposits 901ms old were no longer counted")
		}
		clock.Advance(2001 * time.Millisecond)
		b.Request()
		clock.Advance(301 * time.Millisecond)
		b.Request()
		clock.Advance(801 * time.Millisecond)
		b.Request()
		if !retry(b) {
			t.Error("the second and third deposits did not pay for a retry")
		}
	})
	t.Run("Reserve", func(t *testing.T) {
		b := newTpsBudget(time.Second, 5, 1, new(budget.ManualClock))
		for i := range 5 {
			if !retry(b) {
				t.Fatalf("retry %d of the reserve of 5 denied", i+1)
			}
		}
		if retry(b) {
			t.Error("a sixth retry granted from a reserve of 5")
		}
	})
}

package model_test

import (
	"errors"
	"testing"

	"github.com/retrybudget/retrybudget/model"
)

// The two rules at their edges, from their documentation: Envoy admits a
// retry while active < max(min, ⌊ratio × calls⌋); failsafe-go denies one
// when active >= min and active/(calls+active) > ratio.
func TestInFlightRules(t *testing.T) {
	envoy, fs := model.EnvoyDefaults(), model.FailsafeDefaults()
	for _, c := range []struct {
		m             model.InFlight
		active, calls int64
		want          bool
	}{
		{envoy, 2, 0, true}, {envoy, 3, 0, false}, {envoy, 3, 19, false}, {envoy, 3, 20, true}, {envoy, 4, 20, false},
		{envoy, 4, 25, true}, {envoy, 5, 25, false},
		{fs, 2, 0, true}, {fs, 3, 11, false}, {fs, 3, 12, true}, // 3/15 = 0.2 is not above 0.2
		{fs, 4, 16, true}, {fs, 5, 16, false},
		{model.InFlight{PPM: 0, MinConcurrency: 0}, 0, 100, false},
		{model.InFlight{PPM: 1_000_000, MinConcurrency: 0, Rule: model.Failsafe}, 1000, 0, true},
	} {
		if got := c.m.Admits(c.active, c.calls); got != c.want {
			t.Errorf("%v rule: Admits(%d, %d) = %v, want %v", c.m.Rule, c.active, c.calls, got, c.want)
		}
		// Balance agrees: a retry is admitted exactly when some are left.
		s := model.InFlightState{Calls: c.calls, Retries: c.active}
		if got := c.m.Balance(s) > 0; got != c.want {
			t.Errorf("%v rule: Balance(%+v) = %d, but Admits says %v", c.m.Rule, s, c.m.Balance(s), c.want)
		}
	}
}

// Ends of what never started change nothing, and a grant is in flight until
// its attempt ends.
func TestInFlightStructure(t *testing.T) {
	m := model.EnvoyDefaults()
	s := m.Init()
	for _, op := range []model.Op{model.OpCallEnd, model.OpAttemptEnd(model.Transient), model.OpAttemptEnd(model.FirstAttempt), model.OpSuccess(model.Throttled)} {
		if s2, _ := m.Step(s, op); s2 != s {
			t.Errorf("%v on an idle budget gave %s", op, m.DescribeState(s2))
		}
	}
	s, _ = m.Step(s, model.OpRequest)
	var g bool
	if s, g = m.Step(s, model.OpRetry(model.Throttled)); !g || s.Retries != 1 {
		t.Fatalf("a first retry: granted %v, state %s", g, m.DescribeState(s))
	}
	if _, g = m.Step(s, model.OpRetry(model.Kind(7))); g {
		t.Error("a kind that is not a retry kind was granted")
	}
	s, _ = m.Step(s, model.OpAttemptEnd(model.Transient)) // kinds are not told apart
	s, _ = m.Step(s, model.OpCallEnd)
	if s != m.Init() {
		t.Errorf("after the call ended: %s", m.DescribeState(s))
	}
}

func TestInFlightValidate(t *testing.T) {
	for _, m := range []model.InFlight{{PPM: -1}, {PPM: 1_000_001}, {MinConcurrency: -1}, {MinConcurrency: 1 << 32}, {Rule: 9}} {
		if err := m.Validate(); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("%+v: Validate() = %v, want ErrInvalid", m, err)
		}
	}
	if err := model.EnvoyDefaults().Validate(); err != nil {
		t.Error(err)
	}
}

// The additive reserve (Finagle, tower) is added to the ratio's allowance;
// the floor (SRE, Envoy) is a minimum it is raised to.
func TestRatioReserve(t *testing.T) {
	grants := func(m model.Ratio, requests int) int {
		s := m.Init()
		for range requests {
			s, _ = m.Step(s, model.OpRequest)
		}
		n := 0
		for {
			var g bool
			if s, g = m.Step(s, model.OpRetry(model.Transient)); !g {
				return n
			}
			n++
		}
	}
	floor := model.SRE()
	reserve := floor
	reserve.Floor, reserve.Reserve = 0, 3
	for _, c := range []struct {
		requests, floor, reserve int
	}{{0, 3, 3}, {10, 3, 4}, {100, 10, 13}, {1000, 100, 103}} {
		if got := grants(floor, c.requests); got != c.floor {
			t.Errorf("floor 3, %d requests: %d granted, want %d", c.requests, got, c.floor)
		}
		if got := grants(reserve, c.requests); got != c.reserve {
			t.Errorf("reserve 3, %d requests: %d granted, want %d", c.requests, got, c.reserve)
		}
	}
	if err := (model.Ratio{PPM: 1, Window: 1, Slots: 1, Reserve: -1}).Validate(); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("a negative reserve: %v", err)
	}
}

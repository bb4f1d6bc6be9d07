package model_test

import (
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/model"
)

// Step must not modify the state it is given: porcupine and the minimizer
// both reuse states.
func TestRatioStepDoesNotModifyItsInput(t *testing.T) {
	m := model.Ratio{PPM: 500_000, Window: 4 * time.Second, Slots: 4, Floor: 1}
	s := m.Init()
	for range 3 {
		s, _ = m.Step(s, model.OpRequest)
	}
	before := m.Hash(s)
	kept := s
	next, _ := m.Step(s, model.OpRequest)
	next, _ = m.Step(next, model.OpRetry(model.Transient))
	if m.Hash(kept) != before || m.Equal(kept, next) {
		t.Errorf("Step changed its input state: now %s", m.DescribeState(kept))
	}
}

// Refill is path-independent: one long step earns what many short ones do.
func TestTokenBucketRefillIsPathIndependent(t *testing.T) {
	m := model.TokenBucket{Capacity: 10_000, TransientCost: 10_000, ThrottledCost: 1, RefillPerSecond: 777}
	one, _ := m.Step(m.Init(), model.OpRetry(model.Transient))
	many := one
	one, _ = m.Step(one, model.OpAdvance(7*time.Second+3))
	one, _ = m.Step(one, model.OpSuccess(model.FirstAttempt))
	for range 7000 {
		many, _ = m.Step(many, model.OpAdvance(time.Millisecond))
		many, _ = m.Step(many, model.OpSuccess(model.FirstAttempt))
	}
	many, _ = m.Step(many, model.OpAdvance(3))
	many, _ = m.Step(many, model.OpSuccess(model.FirstAttempt))
	if !m.Equal(one, many) {
		t.Errorf("one step: %+v; many steps: %+v", one, many)
	}
	if one.Tokens != 5_439 { // 7.000000003 s × 777 = 5439.000002331 milli-tokens
		t.Errorf("tokens after 7s at 0.777/s = %d milli, want 5439", one.Tokens)
	}
}

func TestEqualStatesHashEqual(t *testing.T) {
	m := model.SRE()
	a, _ := m.Step(m.Init(), model.OpRequest)
	b, _ := m.Step(m.Init(), model.OpRequest)
	if !m.Equal(a, b) || m.Hash(a) != m.Hash(b) {
		t.Errorf("equal states: Equal = %v, hashes %x and %x", m.Equal(a, b), m.Hash(a), m.Hash(b))
	}
	c, _ := m.Step(b, model.OpRequest)
	if m.Equal(a, c) {
		t.Errorf("Equal(%s, %s) = true", m.DescribeState(a), m.DescribeState(c))
	}
}

func TestOpStrings(t *testing.T) {
	tests := []struct {
		op      model.Op
		granted bool
		want    string
	}{
		{model.OpRequest, false, "request"},
		{model.OpRetry(model.Transient), true, "retry(transient) -> granted"},
		{model.OpRetry(model.Throttled), false, "retry(throttled) -> denied"},
		{model.OpSuccess(model.FirstAttempt), false, "success(first)"},
		{model.OpAdvance(1200 * time.Millisecond), false, "advance(1.2s)"},
		{model.Op{Op: 42}, false, "Op(42)"},
		{model.OpRetry(model.Kind(9)), false, "retry(Kind(9)) -> denied"},
	}
	for _, tt := range tests {
		if got := model.Describe(tt.op, tt.granted); got != tt.want {
			t.Errorf("Describe(%#v, %v) = %q, want %q", tt.op, tt.granted, got, tt.want)
		}
	}
}

func TestOpTextRoundTrip(t *testing.T) {
	ops := []model.Op{
		model.OpRequest,
		model.OpRetry(model.Transient), model.OpRetry(model.Throttled), model.OpRetry(model.FirstAttempt), model.OpRetry(model.Kind(7)),
		model.OpSuccess(model.FirstAttempt), model.OpSuccess(model.Throttled),
		model.OpReset, model.OpAdvance(0), model.OpAdvance(1500 * time.Millisecond), model.OpAdvance(-3), model.OpAdvance(1<<63 - 1), model.OpAdvance(-1 << 63),
	}
	for _, op := range ops {
		text, err := op.MarshalText()
		if err != nil {
			t.Errorf("%v.MarshalText() = %v", op, err)
			continue
		}
		var got model.Op
		if err := got.UnmarshalText(text); err != nil || got != op {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", text, got, err, op)
		}
	}
	for _, bad := range []string{"", "retry", "retry(", "retry(sideways)", "advance(soon)", "request()", "Kind(7)", "success(Kind(300))"} {
		var op model.Op
		if err := op.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("UnmarshalText(%q) = %v, want an error", bad, op)
		}
	}
	if _, err := (model.Op{}).MarshalText(); err == nil {
		t.Errorf("MarshalText of the zero Op succeeded, want an error")
	}
}

func TestResetKeepsTheClock(t *testing.T) {
	m := model.TokenBucket{Capacity: 10_000, TransientCost: 10_000, ThrottledCost: 1, RefillPerSecond: 1000}
	s, _ := m.Step(m.Init(), model.OpAdvance(3*time.Second))
	s, _ = m.Step(s, model.OpRetry(model.Transient))
	s, _ = m.Step(s, model.OpReset)
	if s.Tokens != 10_000 || s.Clock.Now != 3*time.Second {
		t.Errorf("after reset: %+v, want a full bucket at 3s", s)
	}
	r := model.SRE()
	rs, _ := r.Step(r.Init(), model.OpRequest)
	rs, _ = r.Step(rs, model.OpReset)
	if len(rs.Window) != 0 {
		t.Errorf("ratio after reset: %s, want an empty window", r.DescribeState(rs))
	}
}

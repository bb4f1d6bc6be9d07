package model_test

// Boundary tests of the specifications: each pins one edge of a rule in a
// model's doc comment (the allowance, a slot boundary, a negative instant,
// the strict half of a throttle, the nanosecond a refill fills the bucket),
// found by mutation testing (gremlins) as edges the other tests did not
// reach.

import (
	"slices"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/model"
)

// steps applies ops to s in order and returns the final state and the
// answers of the Retry operations.
func steps[S any](m model.Model[S], s S, ops ...model.Op) (S, []bool) {
	var granted []bool
	for _, op := range ops {
		var g bool
		s, g = m.Step(s, op)
		if op.Op == model.Retry {
			granted = append(granted, g)
		}
	}
	return s, granted
}

func repeatOp(n int, op model.Op) []model.Op {
	ops := make([]model.Op, n)
	for i := range ops {
		ops[i] = op
	}
	return ops
}

var transient = model.OpRetry(model.Transient)

// A retry is granted while the retries in the window, this one included,
// are at most ⌊PPM × requests / 1e6⌋ (when that is above Floor).
func TestRatioAllowance(t *testing.T) {
	tests := []struct {
		ppm, floor, requests int64
		want                 int // retries granted before the first denial
	}{
		{100_000, 0, 9, 0},
		{100_000, 0, 10, 1},
		{100_000, 0, 29, 2},
		{100_000, 0, 30, 3},
		{100_000, 2, 10, 2}, // the floor is above the ratio's 1
		{100_000, 1, 20, 2}, // the ratio is above the floor
		{1_000_000, 0, 5, 5},
		{333_333, 0, 3, 0}, // 0.999999
		{333_334, 0, 3, 1}, // 1.000002
	}
	for _, tt := range tests {
		m := model.Ratio{PPM: tt.ppm, Window: time.Second, Slots: 1, Floor: tt.floor}
		s, _ := steps(m, m.Init(), repeatOp(int(tt.requests), model.OpRequest)...)
		_, granted := steps(m, s, repeatOp(tt.want+2, transient)...)
		for i, g := range granted {
			if g != (i < tt.want) {
				t.Errorf("PPM %d, floor %d, %d requests: retry %d granted = %v, want %v", tt.ppm, tt.floor, tt.requests, i+1, g, i < tt.want)
			}
		}
	}
}

// at returns s with its clock moved to t.
func at(m model.Ratio, s model.RatioState, t time.Duration) model.RatioState {
	s, _ = m.Step(s, model.OpAdvance(t-s.Clock.Now))
	return s
}

// Slot n covers [n×width, (n+1)×width), width = Window/Slots rounded down,
// for negative instants too; the window at an instant in slot h holds slots
// h-Slots+1 through h. So a request made at instant t leaves the window when
// slot ⌊t/width⌋+Slots begins, and not a nanosecond before.
func TestRatioSlotBoundaries(t *testing.T) {
	tests := []struct {
		window        time.Duration
		slots         int64
		start, at     time.Duration // start: the clock's reading and the latest seen
		slot          int64
		leaves        time.Duration // (slot + slots) × width
		windowAtStart []model.SlotCount
	}{
		{6, 2, -100, -10, -4, -6, nil},
		{6, 2, -100, -7, -3, -3, nil},
		{6, 2, -100, -6, -2, 0, nil},
		{6, 2, -100, -4, -2, 0, nil},
		{6, 2, -100, -3, -1, 3, nil},
		{6, 2, -100, -1, -1, 3, nil},
		{6, 2, 0, 0, 0, 6, nil},
		{6, 2, 0, 2, 0, 6, nil},
		{6, 2, 0, 3, 1, 9, nil},
		{10, 3, 0, 2, 0, 9, nil}, // width 10/3 = 3
		{10, 3, 0, 8, 2, 15, nil},
		{10 * time.Second, 10, 0, 1500 * time.Millisecond, 1, 11 * time.Second, nil},
	}
	for _, tt := range tests {
		m := model.Ratio{PPM: 1_000_000, Window: tt.window, Slots: tt.slots}
		s := model.RatioState{Clock: model.Clock{Now: tt.start, Seen: tt.start}}
		s = at(m, s, tt.at)
		s, _ = m.Step(s, model.OpRequest)
		if want := []model.SlotCount{{Slot: tt.slot, Requests: 1}}; !slices.Equal(s.Window, want) {
			t.Errorf("%+v: request at %d: window %+v, want %+v", tt, tt.at, s.Window, want)
		}
		s = at(m, s, tt.leaves-1)
		s, granted := m.Step(s, transient)
		if !granted {
			t.Errorf("%+v: retry at %d denied, want granted: the request is still in the window", tt, tt.leaves-1)
		}
		s = at(m, s, tt.leaves)
		s, _ = m.Step(s, model.OpRequest) // allows one retry, which the one above has used
		s, granted = m.Step(s, transient)
		if granted {
			t.Errorf("%+v: second retry at %d granted, want denied: the first request has left", tt, tt.leaves)
		}
		if len(s.Window) != 2 || s.Window[0].Requests != 0 || s.Window[1].Requests != 1 {
			t.Errorf("%+v: window at %d is %+v, want the retry's slot and the new request's", tt, tt.leaves, s.Window)
		}
	}
}

// Window lists the slots that hold a count, oldest first, one entry a slot.
func TestRatioWindowEntries(t *testing.T) {
	m := model.Ratio{PPM: 500_000, Window: 3 * time.Second, Slots: 3}
	s, _ := steps(m, m.Init(),
		model.OpRequest, model.OpRequest, transient, // slot 0
		model.OpAdvance(time.Second), model.OpRequest, // slot 1
		model.OpAdvance(time.Second), transient, transient, // slot 2: ⌊3/2⌋ = 1 retry allowed, and used: both denied
	)
	want := []model.SlotCount{{Slot: 0, Requests: 2, Retries: 1}, {Slot: 1, Requests: 1}}
	if !slices.Equal(s.Window, want) {
		t.Errorf("window %+v, want %+v", s.Window, want)
	}
	s, _ = steps(m, s, model.OpAdvance(time.Second), transient) // slot 3: slot 0 leaves
	want = []model.SlotCount{{Slot: 1, Requests: 1}}
	if !slices.Equal(s.Window, want) {
		t.Errorf("window at 3s %+v, want %+v", s.Window, want)
	}
	if got := m.DescribeState(s); got != "requests=1 retries=0 now=3s" {
		t.Errorf("DescribeState = %q", got)
	}
	// Hashing any state works, the empty one included, and equal states
	// hash equal.
	if m.Hash(m.Init()) != m.Hash(model.RatioState{}) {
		t.Error("two empty states hash differently")
	}
	if m.Hash(s) == m.Hash(m.Init()) {
		t.Errorf("%s hashes as the empty state", m.DescribeState(s))
	}
}

// The count after the failure's token is taken must be strictly more than
// Max/2; it never goes below 0, and Success adds Ratio up to Max.
func TestThrottleHalf(t *testing.T) {
	tests := []struct {
		max     int64
		granted []bool // successive retries from full
	}{
		{2_000, []bool{false, false, false}}, // 1 token left is exactly half
		{2_001, []bool{true, false, false}},
		{3_000, []bool{true, false, false, false}},
		{4_000, []bool{true, false, false, false, false}},
		{4_001, []bool{true, true, false, false, false}},
	}
	for _, tt := range tests {
		m := model.Throttle{Max: tt.max, Ratio: 100}
		s, granted := steps(m, m.Init(), repeatOp(len(tt.granted), transient)...)
		if !slices.Equal(granted, tt.granted) {
			t.Errorf("Max %d: retries %v, want %v", tt.max, granted, tt.granted)
		}
		if s.Tokens != max(tt.max-int64(len(tt.granted))*1000, 0) {
			t.Errorf("Max %d: %d milli-tokens after %d retries", tt.max, s.Tokens, len(tt.granted))
		}
	}
	m := model.Throttle{Max: 3_000, Ratio: 600}
	s, _ := steps(m, m.Init(), repeatOp(5, transient)...)
	if s.Tokens != 0 || m.Balance(s) != 0 {
		t.Errorf("after 5 retries of 3 tokens: %d, want 0", s.Tokens)
	}
	s, g := m.Step(s, model.OpRetry(model.FirstAttempt))
	if g || s.Tokens != 0 {
		t.Errorf("Retry(first) = %v with %d tokens, want denied, nothing taken", g, s.Tokens)
	}
	for _, want := range []int64{600, 1_200, 1_800, 2_400, 3_000, 3_000} {
		s, _ = m.Step(s, model.OpSuccess(model.FirstAttempt))
		if s.Tokens != want {
			t.Errorf("after a success: %d, want %d", s.Tokens, want)
		}
	}
	if got := m.DescribeState(s); got != "tokens=3" {
		t.Errorf("DescribeState = %q, want tokens=3", got)
	}
}

// A refill fills the bucket at the first nanosecond by which it has earned
// the shortfall, and a full bucket carries no fraction: at 7 milli-tokens a
// second the bucket is 1 short for 142,857,143ns (7 × that is 1.000000001
// milli-tokens).
func TestTokenBucketRefillRounding(t *testing.T) {
	m := model.TokenBucket{Capacity: 1_000, TransientCost: 1, ThrottledCost: 7, RefillPerSecond: 7}
	want := func(s model.TokenBucketState, tokens, frac int64) {
		t.Helper()
		if s.Tokens != tokens || s.Frac != frac || m.Balance(s) != tokens {
			t.Errorf("state %+v, want tokens %d frac %d", s, tokens, frac)
		}
	}
	s, _ := steps(m, m.Init(), transient, model.OpAdvance(142_857_142), model.OpSuccess(model.FirstAttempt))
	want(s, 999, 999_999_994)
	s, _ = steps(m, s, model.OpAdvance(1), model.OpSuccess(model.FirstAttempt))
	want(s, 1_000, 0)
	s, _ = steps(m, s, model.OpRetry(model.Throttled), model.OpAdvance(857_142_857), model.OpSuccess(model.FirstAttempt))
	want(s, 998, 999_999_999)
	s, _ = steps(m, s, model.OpAdvance(1), model.OpSuccess(model.FirstAttempt))
	want(s, 999, 6)
	s, _ = steps(m, s, model.OpAdvance(142_857_141), model.OpSuccess(model.FirstAttempt))
	want(s, 999, 999_999_993)
	s, _ = steps(m, s, model.OpAdvance(1), model.OpSuccess(model.FirstAttempt))
	want(s, 1_000, 0)
	if got := m.DescribeState(s); got != "tokens=1 now=1.142857143s" {
		t.Errorf("DescribeState = %q", got)
	}
}

// The balance never exceeds Capacity, however large the carried fraction or
// the time elapsed, and a deposit that fills the bucket drops the fraction.
func TestTokenBucketNeverOverfills(t *testing.T) {
	m := model.TokenBucket{Capacity: 1_000, TransientCost: 1, ThrottledCost: 1, RefillPerSecond: 1}
	s, _ := steps(m, m.Init(), transient, model.OpAdvance(600*time.Millisecond), transient)
	if s.Tokens != 998 || s.Frac != 600_000_000 {
		t.Fatalf("state %+v, want 998 tokens and 0.6 carried", s)
	}
	for _, tt := range []struct {
		d    time.Duration
		want int64
	}{{1400*time.Millisecond - 1, 999}, {1400 * time.Millisecond, 1_000}, {2500 * time.Millisecond, 1_000}, {100 * time.Second, 1_000}} {
		if got := m.Balance(model.TokenBucketState{Tokens: s.Tokens, Frac: s.Frac, Clock: model.Clock{Now: s.Clock.Now + tt.d, Seen: s.Clock.Seen}}); got != tt.want {
			t.Errorf("balance %v later: %d, want %d", tt.d, got, tt.want)
		}
	}
	// A refund that brings the balance to Capacity exactly leaves no
	// fraction behind.
	s, _ = steps(m, s, model.OpAdvance(500*time.Millisecond), model.OpSuccess(model.Transient)) // 1.1 earned: 999 and 0.1 carried; the refund of 1 fills it
	if s.Tokens != 1_000 || s.Frac != 0 {
		t.Errorf("after a refund to Capacity: %+v, want 1000 tokens and no fraction", s)
	}
	s, _ = steps(m, s, transient, model.OpAdvance(time.Second-1), model.OpSuccess(model.FirstAttempt))
	if s.Tokens != 999 || s.Frac != 999_999_999 {
		t.Errorf("1s-1ns after the next retry: %+v, want 999 and 0.999999999 carried", s)
	}
}

func TestClockString(t *testing.T) {
	if got := (model.Clock{Now: time.Second, Seen: 2 * time.Second}).String(); got != "now=1s seen=2s" {
		t.Errorf("Clock.String() = %q", got)
	}
	if got := (model.Clock{Now: 2 * time.Second, Seen: time.Second}).String(); got != "now=2s" {
		t.Errorf("Clock.String() = %q", got)
	}
}

// A history names client 0, which runs before the concurrent part, "pre",
// and the others "g1", "g2", ….
func TestHistoryNamesClients(t *testing.T) {
	for c, want := range map[int]string{0: "[0,0] pre request", 1: "[0,0] g1 request", 12: "[0,0] g12 request"} {
		if got := (model.Operation{Client: c, Op: model.OpRequest}).String(); got != want {
			t.Errorf("the operation of client %d is %q, want %q", c, got, want)
		}
	}
	h := model.History{{Client: 0, Op: model.OpRequest}, {Client: 2, Op: transient, Granted: true, Call: 3, Return: 5}, {Client: 1, Op: transient, Pending: true, Call: 4}}
	if got := (model.History{}).String(); got != "" {
		t.Errorf("History.String() of an empty history = %q, want \"\"", got)
	}
	const want = "[0,0] pre request\n[3,5] g2 retry(transient) -> granted\n[4,…] g1 retry(transient) -> unknown (pending)\n"
	if got := h.String(); got != want {
		t.Errorf("History.String() = %q, want %q", got, want)
	}
}

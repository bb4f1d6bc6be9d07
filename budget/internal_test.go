package budget

// Unit tests of unexported helpers at the edges of what their doc comments
// promise, where the exported API cannot reach: every caller rejects the
// values on which a wrong answer would show.

import (
	"math"
	"testing"
)

// toMilli reports false for a value too large for int64: 9223372036854776
// tokens is 2^63 milli-tokens once rounded to a float64, one past MaxInt64.
func TestToMilliRange(t *testing.T) {
	tests := []struct {
		x    float64
		want int64
		ok   bool
	}{
		{1.5, 1500, true},
		{0.0004, 0, true},
		{-2.5, -2500, true},
		{9223372036854774, 9223372036854773760, true}, // the float64 nearest 9223372036854774000
		{9223372036854776, 0, false},                  // 2^63
		{-9223372036854776, 0, false},                 // -2^63: rejected as its mirror is, though int64 holds it
		{math.MaxFloat64, 0, false},
		{math.Inf(1), 0, false},
		{math.Inf(-1), 0, false},
		{math.NaN(), 0, false},
	}
	for _, tt := range tests {
		got, ok := toMilli(tt.x)
		if got != tt.want || ok != tt.ok {
			t.Errorf("toMilli(%v) = %d, %v; want %d, %v", tt.x, got, ok, tt.want, tt.ok)
		}
	}
}

// The window whose head is h holds slot numbers h-len+1 through h, across
// the ends of int64 too.
func TestInWindow(t *testing.T) {
	r := &Ratio{slots: make([]ratioSlot, 4)}
	for _, h := range []int64{-5, 0, 7, math.MaxInt64, math.MinInt64, math.MinInt64 + 2} {
		for d, want := range map[int64]bool{-1: false, 0: true, 1: true, 3: true, 4: false, 5: false} {
			if got := r.inWindow(h-d, h); got != want {
				t.Errorf("inWindow(%d, %d) = %v, want %v", h-d, h, got, want)
			}
		}
	}
}

func TestFloorDivMod(t *testing.T) {
	tests := []struct{ a, b, q, m int64 }{
		{7, 3, 2, 1},
		{6, 3, 2, 0},
		{0, 3, 0, 0},
		{-1, 3, -1, 2},
		{-3, 3, -1, 0},
		{-4, 3, -2, 2},
		{-7, 3, -3, 2},
		{math.MinInt64, 1, math.MinInt64, 0},
		{math.MinInt64, 3, -3074457345618258603, 1},
		{math.MaxInt64, 3, 3074457345618258602, 1},
		{-1, math.MaxInt64, -1, math.MaxInt64 - 1},
	}
	for _, tt := range tests {
		if q := floorDiv(tt.a, tt.b); q != tt.q {
			t.Errorf("floorDiv(%d, %d) = %d, want %d", tt.a, tt.b, q, tt.q)
		}
		if m := floorMod(tt.a, tt.b); m != tt.m {
			t.Errorf("floorMod(%d, %d) = %d, want %d", tt.a, tt.b, m, tt.m)
		}
	}
}

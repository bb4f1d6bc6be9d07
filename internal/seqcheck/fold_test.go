package seqcheck

import (
	"slices"
	"testing"
)

// Runs of three or more equal lines fold into one; shorter runs stay.
func TestFold(t *testing.T) {
	in := []string{"advance(1s)", "advance(1s)", "advance(1s)", "request", "request", "retry(transient) -> granted"}
	want := []string{"advance(1s) ×3", "request", "request", "retry(transient) -> granted"}
	if got := Fold(in); !slices.Equal(got, want) {
		t.Errorf("Fold = %q, want %q", got, want)
	}
}

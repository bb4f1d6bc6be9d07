package budgettest

import (
	"strings"
	"testing"
)

// What Run prints of a Failure has lines of at most maxLine characters:
// long ones are broken at spaces, with nothing lost.
func TestFailureLinesAreShort(t *testing.T) {
	long := strings.Repeat("retry(transient), ", 40)
	f := &Failure{Rule: strings.Repeat("a rule ", 40), Where: "here", Detail: "  g1: " + long + "\nshort"}
	msg := wrapLines(f.Error(), maxLine)
	for _, l := range strings.Split(msg, "\n") {
		if len(l) > maxLine {
			t.Errorf("a line of %d characters: %q", len(l), l)
		}
	}
	if got, want := strings.Count(msg, "retry(transient)"), 40; got != want {
		t.Errorf("%d operations printed, want %d", got, want)
	}
	if !strings.HasSuffix(msg, "\nshort") {
		t.Errorf("the last line is lost:\n%s", msg)
	}
}

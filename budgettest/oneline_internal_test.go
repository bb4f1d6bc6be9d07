package budgettest

import "testing"

// A reason that spans lines (a build's output) is said in one line.
func TestOneLine(t *testing.T) {
	build := "building the instrumented test binary: exit status 1\n# example.com/old\nold.go:3:4: implicit function instantiation requires go1.18\nold.go:9:4: more\nold.go:12:4: more"
	want := "building the instrumented test binary: exit status 1: old.go:3:4: implicit function instantiation requires go1.18 (and 2 more lines)"
	if got := oneLine(build); got != want {
		t.Errorf("oneLine = %q, want %q", got, want)
	}
	if got := oneLine("no go.mod"); got != "no go.mod" {
		t.Errorf("a one-line reason became %q", got)
	}
}

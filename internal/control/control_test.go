package control

import (
	"flag"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestRunPattern(t *testing.T) {
	for _, tt := range []struct{ name, match, not string }{
		{"TestX", "TestX", "TestXY"},
		{"TestKillMatrix/budget.Ratio/Linearizable", "TestKillMatrix/budget.Ratio/Linearizable", "TestKillMatrix/budgetXRatio/Linearizable"},
		{"TestA/b+c#01", "TestA/b+c#01", "TestA/bbc#01"},
	} {
		p := RunPattern(tt.name)
		parts := strings.Split(p, "/")
		match := func(name string) bool {
			elems := strings.Split(name, "/")
			if len(elems) != len(parts) {
				return false
			}
			for i, e := range elems {
				if !regexp.MustCompile(parts[i]).MatchString(e) {
					return false
				}
			}
			return true
		}
		if !match(tt.match) || match(tt.not) {
			t.Errorf("RunPattern(%q) = %q: matches %q %v (want true), %q %v (want false)", tt.name, p, tt.match, match(tt.match), tt.not, match(tt.not))
		}
	}
}

func TestCallIDCountsPerRunOfATest(t *testing.T) {
	var ids []string
	for range 2 {
		t.Run("Sub", func(t *testing.T) {
			ids = append(ids, CallID(t), CallID(t))
		})
	}
	want := []string{"TestCallIDCountsPerRunOfATest/Sub#0", "TestCallIDCountsPerRunOfATest/Sub#1", "TestCallIDCountsPerRunOfATest/Sub#01#0", "TestCallIDCountsPerRunOfATest/Sub#01#1"}
	if !slices.Equal(ids, want) {
		t.Errorf("CallID = %q, want %q", ids, want)
	}
}

func setFlag(t *testing.T, name, value string) {
	t.Helper()
	f := flag.Lookup(name)
	old := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Value.Set(old) })
}

func TestModes(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want Mode
		err  bool
	}{{"auto", Auto, false}, {"off", Off, false}, {"require", Require, false}, {" off ", Off, false}, {"", Auto, false}, {"sometimes", "", true}} {
		setFlag(t, "budgettest.control", tt.v)
		m, err := CurrentMode()
		if m != tt.want || (err != nil) != tt.err {
			t.Errorf("-budgettest.control=%q: CurrentMode() = %q, %v; want %q, error %v", tt.v, m, err, tt.want, tt.err)
		}
	}
}

func TestOptionsAreDistinctAndStable(t *testing.T) {
	seen := map[uint64]bool{}
	for s := range uint64(4) {
		for k := range 8 {
			o := Options(s, k, 100)
			if seen[o.Seed] {
				t.Fatalf("Options(%d, %d) repeats seed %d", s, k, o.Seed)
			}
			seen[o.Seed] = true
			if o2 := Options(s, k, 100); o2.Seed != o.Seed || o2.Strategy != o.Strategy {
				t.Fatalf("Options(%d, %d) changed between calls: %v, %v", s, k, o, o2)
			}
		}
	}
	if Strategy(0) == Strategy(1) || Strategy(1) == Strategy(2) {
		t.Errorf("Strategy(0..2) = %v, %v, %v: want three different strategies", Strategy(0), Strategy(1), Strategy(2))
	}
}

func TestIsSuite(t *testing.T) {
	for p, want := range map[string]bool{
		modulePath + "/budgettest":                true,
		modulePath + "/internal/harness":          true,
		modulePath + "/cmd/budgetcheck":           true,
		modulePath + "/budget":                    false,
		modulePath + "/internal/subjects/mutants": false,
		"example.com/budgettest":                  false,
		"github.com/failsafe-go/x/budget":         false,
		modulePath + "/internal/subjects/zoo":     false,
		modulePath + "/internal/control":          true,
		modulePath + "/linearizability":           true,
		modulePath + "/redisbudget":               false,
		modulePath + "/internal/stressrun":        true,
	} {
		if got := isSuite(p); got != want {
			t.Errorf("isSuite(%q) = %v, want %v", p, got, want)
		}
	}
}

// A saved outcome is found again whatever the shell's bookkeeping says
// (go test run from a shell in the package's directory, then by a program
// in another: make routes, then go test -race in CI) and however often
// PATH repeats a directory, and not when another variable of the
// environment, one a test may read, differs.
func TestOutcomeKeyIgnoresTheShellsBookkeeping(t *testing.T) {
	c := &Child{Path: "/cache/children/0123/child.test"}
	key := func() string {
		k, err := OutcomeKey(t, c, "TestX#0|Linearizable", nil, 2)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	t.Setenv("PWD", "/a/module/pkg")
	t.Setenv("OLDPWD", "/a/module")
	t.Setenv("SHLVL", "1")
	t.Setenv("_", "/usr/bin/go")
	t.Setenv("RETRYBUDGET_KEY_PROBE", "one")
	t.Setenv("PATH", "/go/bin:/usr/bin:/bin")
	first := key()
	t.Setenv("PWD", "../../testdata/pkg")
	t.Setenv("OLDPWD", "/elsewhere")
	t.Setenv("SHLVL", "3")
	t.Setenv("_", "/tmp/go-build/b001/exe/budgetcheck")
	t.Setenv("PATH", "/go/bin:/go/bin:/usr/bin:/go/bin:/bin") // go test run by go test's child
	if got := key(); got != first {
		t.Errorf("the key changed with PWD, OLDPWD, SHLVL, _ and a PATH that repeats a directory (%s, then %s): a pass saved by one shell is not found from another", first, got)
	}
	t.Setenv("PATH", "/usr/bin:/go/bin:/bin") // other lookups
	if got := key(); got == first {
		t.Errorf("the key stayed %s when PATH found programs elsewhere", got)
	}
	t.Setenv("PATH", "/go/bin:/usr/bin:/bin")
	t.Setenv("RETRYBUDGET_KEY_PROBE", "two")
	if got := key(); got == first {
		t.Errorf("the key stayed %s when a variable a test may read changed", got)
	}
}

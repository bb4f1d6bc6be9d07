// Command budgetcheck runs your tests with controlled interleavings: it
// rewrites the packages you name so that every synchronization point
// (sync/atomic, Mutex and RWMutex, Once, channel operations, select) calls
// package yield, and runs go test on them through -overlay, so that your
// files never change and stacks still name your lines. Under it, the
// Linearizable check of budgettest explores schedules of every scenario
// (PCT and a random walk; see package yield), and a violation prints the
// flag that replays it exactly.
//
// Usage, from your own module:
//
//	go run github.com/retrybudget/retrybudget/cmd/budgetcheck [-instrument patterns] [go test flags] [packages]
//
// It prints what go test prints (-json included) and exits with its
// status. The packages named are rewritten, their _test.go files too;
// -instrument adds others, comma-separated (the module of the budget you
// test, say, if it is not the one you run from). Reads and writes of the
// fields of struct types those packages declare are yield points too, so
// that a budget with no synchronization at all is preempted between a
// read and its write; -fields=false leaves them out. Flags go test does not
// know, such as -budgettest.seed and -budgettest.schedules, reach the test
// binaries as usual.
//
// What is not rewritten runs as before, with no yield points: other
// modules unless named, the standard library, the runtime, assembly, go
// statements and range over channels. A pass proves no violation in the
// schedules explored.
//
// budgetcheck -matrix [-race=false] [-html DIR] [-json] [-catch-runs N]
// [-ref-reps N] prints this module's kill matrices instead (from a checkout
// of it): every reference budget and loop, and every mutant, through
// every check.
package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/retrybudget/retrybudget/internal/instrument"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-matrix" || os.Args[1] == "--matrix") {
		matrixMain(os.Args[2:])
		return
	}
	inv, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "budgetcheck:", err)
		os.Exit(2)
	}
	os.Exit(run(inv))
}

// invocation is a parsed command line.
type invocation struct {
	goArgs   []string // go test's flags, in the order given
	packages []string // the package patterns
	extra    []string // -instrument patterns
	tags     []string // -tags
	noFields bool     // -fields=false
}

// valueFlags are the flags of go test and go build that take a value, so
// that the word after one (-run TestX) is not taken for a package.
var valueFlags = []string{
	"run", "skip", "bench", "benchtime", "count", "cpu", "parallel", "timeout", "shuffle", "list", "fuzz", "fuzztime",
	"fuzzminimizetime", "coverprofile", "covermode", "coverpkg", "cpuprofile", "memprofile", "memprofilerate",
	"blockprofile", "blockprofilerate", "mutexprofile", "mutexprofilefraction", "trace", "outputdir", "o", "exec",
	"vet", "p", "tags", "ldflags", "gcflags", "asmflags", "gccgoflags", "mod", "modfile", "pkgdir", "toolexec",
	"C", "pgo", "installsuffix", "buildvcs", "compiler", "covermode",
}

func parse(args []string) (invocation, error) {
	var inv invocation
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-args" || a == "--args" {
			inv.goArgs = append(inv.goArgs, args[i:]...)
			break
		}
		if !strings.HasPrefix(a, "-") {
			inv.packages = append(inv.packages, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		takesValue := slices.Contains(valueFlags, name) || name == "instrument"
		if takesValue && !hasValue {
			if i+1 >= len(args) {
				return inv, fmt.Errorf("flag %s needs a value", a)
			}
			i++
			value = args[i]
		}
		switch name {
		case "fields":
			on, err := strconv.ParseBool(cmp.Or(value, "true"))
			if err != nil {
				return inv, fmt.Errorf("-fields=%s: %v", value, err)
			}
			inv.noFields = !on
			continue
		case "instrument":
			for p := range strings.SplitSeq(value, ",") {
				if p = strings.TrimSpace(p); p != "" {
					inv.extra = append(inv.extra, p)
				}
			}
			continue
		case "overlay":
			return inv, errors.New("-overlay is budgetcheck's own: it passes the rewritten files through it")
		case "tags":
			for t := range strings.SplitSeq(value, ",") {
				if t = strings.TrimSpace(t); t != "" {
					inv.tags = append(inv.tags, t)
				}
			}
		case "C":
			return inv, errors.New("-C is not supported: run budgetcheck from the module's directory")
		}
		inv.goArgs = append(inv.goArgs, a)
		if takesValue && !hasValue {
			inv.goArgs = append(inv.goArgs, value)
		}
	}
	return inv, nil
}

// run rewrites, runs go test and returns its exit status.
func run(inv invocation) int {
	patterns := append(slices.Clone(inv.packages), inv.extra...)
	if len(inv.packages) == 0 {
		patterns = append(patterns, ".")
	}
	res, err := instrument.Rewrite(instrument.Config{Patterns: patterns, Tags: inv.tags, Tests: true, Fields: !inv.noFields})
	if err != nil {
		fmt.Fprintln(os.Stderr, "budgetcheck:", err)
		return 2
	}
	defer os.RemoveAll(res.Dir)
	if len(res.Files) == 0 {
		fmt.Fprintf(os.Stderr, "budgetcheck: nothing to instrument in %s: the tests run as plain go test\n", strings.Join(patterns, " "))
	} else {
		fmt.Fprintf(os.Stderr, "budgetcheck: %d yield points in %d files of %s\n", res.Points, len(res.Files), strings.Join(patterns, " "))
	}
	// The packages come first: go test takes every argument after a flag
	// it does not know (-budgettest.seed, say) for the test binary's.
	args := append([]string{"test", "-overlay=" + res.Overlay}, inv.packages...)
	cmd := exec.Command("go", append(args, inv.goArgs...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "budgetcheck:", err)
		return 2
	}
	return 0
}

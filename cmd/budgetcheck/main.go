// Command budgetcheck runs your tests on rewritten code: every
// synchronization point of the packages you name (sync/atomic, Mutex and
// RWMutex, Once, Cond, WaitGroup's Go and Wait, channel operations, select,
// go statements, time.Sleep) calls package yield, and go test builds them through
// -overlay, so that your files never change and stacks still name your
// lines. The checks of budgettest then explore controlled schedules in the
// test binary itself.
//
// Plain go test gives the same controlled verdict without it: budgettest
// rewrites the calling test's package by itself and runs each check's
// controlled stage in an instrumented child process (see package
// budgettest). budgetcheck is for running the rewritten code directly: a
// replay, a profile, -json output of the controlled runs.
//
// Install and run it as a tool of your module:
//
//	go mod edit -tool github.com/retrybudget/retrybudget/cmd/budgetcheck && go mod tidy
//	go tool budgetcheck [-instrument patterns] [-fields=false] [go test flags] [packages]
//
// It prints what go test prints (-json included) and exits with its
// status; budgetcheck -h prints its usage. The packages named (default
// ./...) are rewritten, their _test.go files too; -instrument adds others,
// comma-separated. A package of another module (a dependency in the module
// cache) is rewritten in a copy of its module, which a temporary go.mod
// passed as -modfile puts in its place: your go.mod and go.sum are not
// touched. Reads and writes of the fields of struct types the rewritten
// packages declare are yield points too, so that a budget with no
// synchronization at all is preempted between a read and its write;
// -fields=false leaves them out. Flags go test does not know, such as
// -budgettest.seed and -budgettest.schedules, reach the test binaries as
// usual.
//
// What is not rewritten runs as before, with no yield points: packages not
// named, the standard library, the runtime, assembly. A pass proves no
// violation in the schedules explored.
//
// budgetcheck -matrix [-race=false] [-html DIR] [-json] [-catch.runs N]
// [-ref.reps N] prints this module's kill matrices instead (from a checkout
// of it): every reference budget and loop, and every mutant, through
// every check. The Race column runs in a go test -race of its own, beside
// a go test of the other columns, whose verdicts the race detector does
// not change (-race=false leaves the Race column out).
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

// usage is budgetcheck's own help, printed by -h, -help and --help.
const usage = `usage: budgetcheck [-instrument patterns] [-fields=false] [go test flags] [packages]
       budgetcheck -matrix [-race=false] [-html DIR] [-json] [-catch.runs N] [-ref.reps N]

budgetcheck rewrites the packages named (default ./...), their tests
included, so that every synchronization point calls package yield, and
runs go test on them through -overlay: budgettest's checks then explore
controlled schedules in this process. Plain go test does the same by
itself, in a child process per check; budgetcheck is for running the
rewritten code directly (a replay, a profile, -json output).

Flags of budgetcheck:
  -instrument patterns  more packages to rewrite, comma-separated: the
                        package of a budget in another module, say (its
                        module is rewritten in a copy; your go.mod and
                        go.sum are not touched)
  -fields=false         no yield points at the reads and writes of struct
                        fields of the rewritten packages
  -matrix               print this module's kill matrices (from a checkout
                        of it)
  -h, -help             print this help

Every other flag is go test's, or the test binary's (-budgettest.seed,
-budgettest.schedules, -budgettest.replay), and goes to go test as given.

Install it as a tool of your module:
  go mod edit -tool github.com/retrybudget/retrybudget/cmd/budgetcheck && go mod tidy
  go tool budgetcheck ./...
`

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-matrix" || os.Args[1] == "--matrix") {
		matrixMain(os.Args[2:])
		return
	}
	inv, err := parse(os.Args[1:])
	if errors.Is(err, errHelp) {
		fmt.Fprint(os.Stdout, usage)
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "budgetcheck:", err)
		fmt.Fprintln(os.Stderr, "run budgetcheck -h for its usage")
		os.Exit(2)
	}
	os.Exit(run(inv))
}

// errHelp is parse's answer to -h, -help and --help.
var errHelp = errors.New("help requested")

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
		if name == "h" || name == "help" {
			return inv, errHelp
		}
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
		case "modfile":
			return inv, errors.New("-modfile is budgetcheck's own: it passes a go.mod that names the rewritten copies of other modules")
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
	if len(inv.packages) == 0 {
		inv.packages = []string{"./..."}
	}
	patterns := append(slices.Clone(inv.packages), inv.extra...)
	res, err := instrument.Rewrite(instrument.Config{Patterns: patterns, Tags: inv.tags, Tests: true, Fields: !inv.noFields, Modules: true})
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
	if len(res.Modules) > 0 {
		fmt.Fprintf(os.Stderr, "budgetcheck: rewrote %s in a copy (through -modfile; your go.mod and go.sum are not touched)\n", strings.Join(res.Modules, ", "))
	}
	args := []string{"test", "-overlay=" + res.Overlay}
	if res.ModFile != "" {
		args = append(args, "-modfile="+res.ModFile)
	}
	args = append(args, inv.packages...)
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

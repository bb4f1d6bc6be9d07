package budgettest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/control"
)

// freeChild runs check ck freely, under the race detector, in a child
// process of this test binary (built with -race as it is), and turns what
// the detector printed there into the check's failure: how many reports,
// each distinct pair of sites once, and, for the Race check, the first
// report in full. Run in this process, a racy budget's every distinct
// pair of accesses printed a report of its own (80 of them, 5,300 lines,
// for one missing lock) before the suite's verdict, and Verify could not
// see them at all: the detector fails the test only when it ends.
//
// The Race check always runs so. A check that calls the budget from many
// goroutines runs so until the Race check of the same call has found the
// budget free of races (see stages): after that its reports, if any,
// would be new to the detector, and rare.
func (sub Subject[S]) freeChild(t *testing.T, c call, ck Check) error {
	exe, err := os.Executable()
	if err != nil {
		return sub.run(t, ck) // no child to be had: run it here
	}
	sp, err := control.Spawn(c.t, &control.Child{Path: exe}, c.id+"|"+string(ck), c.prior(), 10*time.Minute)
	if err != nil {
		return fail(ruleNoRace, "%s: the child process that runs %s under -race could not start: %v", sub.name(), ck, err)
	}
	reports := raceReports(sp.Output)
	if ck == CheckRace && len(reports) == 0 && sp.Result != nil {
		raceClean.Store(c.id, true)
	}
	if sp.Result == nil {
		why := "died"
		if sp.Killed {
			why = "ran out of time"
		}
		f := fail(rulePanic, "%s: the child process that runs %s under -race %s before it finished (after %v):\n%s",
			sub.name(), ck, why, sp.Elapsed.Round(time.Millisecond), tail(stripRaces(sp.Output), 60))
		return withRaces(f, ck, reports)
	}
	var o childOutcome
	if err := json.Unmarshal(sp.Result, &o); err != nil {
		return fail(rulePanic, "%s: the outcome of %s under -race is unreadable: %v", sub.name(), ck, err)
	}
	for _, n := range o.Notes {
		t.Logf("%s: %s", sub.name(), n)
	}
	switch {
	case o.Failure != nil && !(len(reports) > 0 && endedByRace(o.Failure)):
		adoptArtifacts(t, o.Failure)
		return withRaces(o.Failure, ck, reports)
	case len(reports) > 0:
		return fail(ruleNoRace, "%s: %s", sub.name(), describeRaces(reports, ck))
	case o.Skip != "":
		return skip(o.Skip)
	case o.Err != "":
		return errors.New(o.Err)
	}
	return nil
}

// endedByRace reports whether f is the testing package's reaction to a
// data race rather than the check's finding: a race inside a
// testing/synctest bubble fails the bubble's test, whose goroutine then
// exits (runtime.Goexit) in the middle of the check.
func endedByRace(f *Failure) bool {
	return f.Rule == string(rulePanic) && strings.Contains(f.Detail, "runtime.Goexit was called")
}

// raceClean holds the calls (by id) whose Race check found no data race.
var raceClean sync.Map

// withRaces adds to f, a check's own failure, what the race detector
// reported while the check ran, if it did.
func withRaces(f *Failure, ck Check, reports []raceReport) *Failure {
	if len(reports) > 0 {
		f.Detail = strings.TrimRight(f.Detail, "\n") + "\nunder -race, moreover, " + describeRaces(reports, ck)
	}
	return f
}

// stripRaces drops the race detector's reports from a child's output,
// which withRaces summarizes.
func stripRaces(out string) string {
	const start, end = "WARNING: DATA RACE", "=================="
	var b strings.Builder
	for {
		i := strings.Index(out, start)
		if i < 0 {
			b.WriteString(out)
			return b.String()
		}
		b.WriteString(strings.TrimSuffix(out[:i], end+"\n"))
		out = out[i:]
		j := strings.Index(out, "\n"+end)
		if j < 0 {
			return b.String()
		}
		out = strings.TrimPrefix(out[j+1+len(end):], "\n")
	}
}

// raceReport is one report of the race detector: its text, and the first
// frame of each of the two accesses (function and file:line), which tell
// the sites apart.
type raceReport struct {
	text  string
	sites [2]string
}

// raceAccess matches the header of one of a report's two accesses ("Read
// at 0x... by goroutine 7:", "Previous write at ...") and the function and
// file:line of its first frame.
var raceAccess = regexp.MustCompile(`(?m)^(?:Previous )?(?:[Aa]tomic )?(?:[Rr]ead|[Ww]rite)[^\n]*:\n  (\S.*)\n      (\S+:\d+)`)

// raceReports reads the race detector's reports out of a child's output.
func raceReports(out string) []raceReport {
	const start, end = "WARNING: DATA RACE", "=================="
	var rs []raceReport
	for {
		i := strings.Index(out, start)
		if i < 0 {
			return rs
		}
		out = out[i:]
		j := strings.Index(out, "\n"+end)
		if j < 0 {
			j = len(out)
		}
		r := raceReport{text: strings.TrimRight(out[:j], "\n")}
		for n, m := range raceAccess.FindAllStringSubmatch(r.text, 2) {
			r.sites[n] = fmt.Sprintf("%s (%s)", m[1], m[2])
		}
		rs = append(rs, r)
		out = out[j:]
	}
}

// describeRaces says what the reports made during check ck amount to:
// their number, each distinct pair of sites once (at most ten), and, for
// the Race check, the first report.
func describeRaces(rs []raceReport, ck Check) string {
	var b strings.Builder
	seen := map[[2]string]bool{}
	var pairs [][2]string
	for _, r := range rs {
		key := r.sites
		if key[1] < key[0] {
			key[0], key[1] = key[1], key[0] // a pair is the same either way round
		}
		if !seen[key] {
			seen[key] = true
			pairs = append(pairs, r.sites)
		}
	}
	sites := "1 pair of sites"
	if len(pairs) != 1 {
		sites = fmt.Sprintf("%d distinct pairs of sites", len(pairs))
	}
	during := "while 64 goroutines called the budget"
	if ck != CheckRace {
		during = "during the " + string(ck) + " check"
	}
	fmt.Fprintf(&b, "the race detector reported %s at %s, %s (a child process of this test, under -race):\n",
		plural(len(rs), "data race"), sites, during)
	for i, p := range pairs {
		if i == 10 {
			fmt.Fprintf(&b, "  and %d more\n", len(pairs)-10)
			break
		}
		fmt.Fprintf(&b, "  %s\n    against %s\n", p[0], p[1])
	}
	if ck != CheckRace {
		return strings.TrimRight(b.String(), "\n") // the Race check prints a report in full
	}
	fmt.Fprintf(&b, "the first report:\n%s", rs[0].text)
	return b.String()
}

// plural spells n things: "1 data race", "3 data races".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

package budgettest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/control"
)

// raceStage runs the Race check, under the race detector, in a child
// process of this test binary (built with -race as it is), and turns what
// the detector printed there into one Failure: how many reports, the sites
// they name, and the first report in full. Run in this process, a racy
// budget's every distinct pair of accesses printed a report of its own
// (80 of them, 5,300 lines, for one missing lock), which buried the
// suite's verdict, and Verify could not see them at all: the detector
// fails the test only when it ends.
func (sub Subject[S]) raceStage(t *testing.T, c call) error {
	exe, err := os.Executable()
	if err != nil {
		return sub.run(t, CheckRace) // no child to be had: run it here
	}
	sp, err := control.Spawn(c.t, &control.Child{Path: exe}, c.id+"|"+string(CheckRace), c.prior(), 10*time.Minute)
	if err != nil {
		return fail(ruleNoRace, "%s: the race run's child process could not start: %v", sub.name(), err)
	}
	if reports := raceReports(sp.Output); len(reports) > 0 {
		return fail(ruleNoRace, "%s: %s", sub.name(), describeRaces(reports))
	}
	if sp.Result == nil {
		why := "died"
		if sp.Killed {
			why = "ran out of time"
		}
		return fail(rulePanic, "%s: the child process of the race run %s before it finished (after %v):\n%s",
			sub.name(), why, sp.Elapsed.Round(time.Millisecond), tail(sp.Output, 60))
	}
	var o childOutcome
	if err := json.Unmarshal(sp.Result, &o); err != nil {
		return fail(rulePanic, "%s: the race run's outcome is unreadable: %v", sub.name(), err)
	}
	for _, n := range o.Notes {
		t.Logf("%s: %s", sub.name(), n)
	}
	switch {
	case o.Failure != nil:
		return o.Failure
	case o.Skip != "":
		return skip(o.Skip)
	case o.Err != "":
		return errors.New(o.Err)
	}
	return nil
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

// describeRaces says what the reports amount to: their number, each
// distinct pair of sites once (at most ten), and the first report.
func describeRaces(rs []raceReport) string {
	var b strings.Builder
	seen := map[[2]string]bool{}
	var pairs [][2]string
	for _, r := range rs {
		if !seen[r.sites] {
			seen[r.sites] = true
			pairs = append(pairs, r.sites)
		}
	}
	sites := "1 pair of sites"
	if len(pairs) != 1 {
		sites = fmt.Sprintf("%d distinct pairs of sites", len(pairs))
	}
	fmt.Fprintf(&b, "the race detector reported %s at %s, while 64 goroutines called the budget (a child process of this test, under -race):\n",
		plural(len(rs), "data race"), sites)
	for i, p := range pairs {
		if i == 10 {
			fmt.Fprintf(&b, "  and %d more\n", len(pairs)-10)
			break
		}
		fmt.Fprintf(&b, "  %s\n    against %s\n", p[0], p[1])
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

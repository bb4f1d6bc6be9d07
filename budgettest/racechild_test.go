//go:build race

package budgettest_test

import (
	"errors"
	"flag"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/model"
)

var racesRE = regexp.MustCompile(`the race detector reported (\d+) data races? at (\d+ distinct pairs|1 pair) of sites`)

// Under -race a budget with no lock at all fails the Race check once,
// with the number of reports, each pair of sites once and the first
// report, and Verify sees it: the detector's reports come from a child
// process. The reference bucket passes.
func TestRaceCheckSummarizesTheReports(t *testing.T) {
	m := model.AWS()
	sub := budgettest.Subject[model.TokenBucketState]{Name: "MissingLock", Model: m,
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return mutants.NewMissingLock(m) }}
	err := budgettest.VerifyCheck(t, sub, budgettest.CheckRace)
	var f *budgettest.Failure
	if !errors.As(err, &f) {
		t.Fatalf("VerifyCheck(Race) on a budget with no lock = %v, want a Failure", err)
	}
	mm := racesRE.FindStringSubmatch(f.Detail)
	if mm == nil || !strings.Contains(f.Rule, "race detector") || !strings.Contains(f.Detail, "the first report:\nWARNING: DATA RACE") {
		t.Fatalf("the failure does not summarize the race reports:\n%v", f)
	}
	if reports, _ := strconv.Atoi(mm[1]); reports < 1 || strings.Count(f.Detail, "WARNING: DATA RACE") != 1 {
		t.Errorf("%s reports, %d printed in full; want every report counted, one printed:\n%v", mm[1], strings.Count(f.Detail, "WARNING: DATA RACE"), f)
	}
	if !strings.Contains(f.Detail, "mutants.(*MissingLock).Retry() (") || !strings.Contains(f.Detail, "\n    against github.com/retrybudget/retrybudget/internal/subjects/mutants.(*MissingLock)") {
		t.Errorf("the sites do not name the budget's methods:\n%v", f)
	}
	sub.Name = "reference"
	sub.New = func(_ *testing.T, c budget.Clock) budget.Budget { return seqcheck.NewTokenBucket(m)(c) }
	if err := budgettest.VerifyCheck(t, sub, budgettest.CheckRace); err != nil {
		t.Errorf("the reference bucket: %v", err)
	}
}

// Under -race a racy budget's Linearizable check runs in a child process
// too: its verdict carries the detector's reports summarized, each pair of
// sites once, and none reaches this process's output (a report here would
// fail this test when it ends, whatever it asserts).
func TestConcurrentChecksSummarizeTheirRaces(t *testing.T) {
	// The controlled stage, which would find the lost update first, is
	// left out: this test is about the free runs under -race.
	setFlag(t, "budgettest.control", "off")
	m := model.AWS()
	sub := budgettest.Subject[model.TokenBucketState]{Name: "MissingLock", Model: m,
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return mutants.NewMissingLock(m) }}
	err := budgettest.VerifyCheck(t, sub, budgettest.CheckLinearizable)
	var f *budgettest.Failure
	if !errors.As(err, &f) {
		t.Fatalf("VerifyCheck(Linearizable) on a budget with no lock = %v, want a Failure", err)
	}
	if !strings.Contains(f.Detail, "during the Linearizable check (a child process of this test, under -race)") {
		t.Fatalf("the failure does not summarize the races of the Linearizable check:\n%v", f)
	}
	if n := strings.Count(f.Detail, "WARNING: DATA RACE"); n != 0 {
		t.Errorf("%d reports printed in full; the Race check is the one to print one:\n%v", n, f)
	}
	if !strings.Contains(f.Detail, "mutants.(*MissingLock).") {
		t.Errorf("the sites do not name the budget's methods:\n%v", f)
	}
}

// setFlag sets the flag name to value for the rest of t.
func setFlag(t *testing.T, name, value string) {
	old := flag.Lookup(name).Value.String()
	if err := flag.Set(name, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flag.Set(name, old) })
}

package lostupdates

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

// smallBucket is RefundClampBucket's model: 10 tokens, 1 per transient
// retry, 0.5 per throttled retry, 0.1 per successful first attempt, no
// refill.
var smallBucket = model.TokenBucket{Capacity: 10_000, TransientCost: 1_000, ThrottledCost: 500, SuccessBonus: 100}

// grpcThrottle is gRPC's maxTokens 10, tokenRatio 0.1.
var grpcThrottle = model.Throttle{Max: 10_000, Ratio: 100}

func newAddClamp(budget.Clock) budget.Budget {
	m := model.AWS()
	return NewAddClampBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus)
}

func newRefundClamp(budget.Clock) budget.Budget {
	m := smallBucket
	return NewRefundClampBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus)
}

func newCASThrottle(budget.Clock) budget.Budget {
	return NewCASThrottle(grpcThrottle.Max, grpcThrottle.Ratio)
}

func newCASBucket2(budget.Clock) budget.Budget {
	m := model.AWS()
	return NewCASBucket2(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus)
}

func newRotateOutside(c budget.Clock) budget.Budget {
	m := model.SRE()
	return NewRotateOutsideLockRatio(m.PPM, m.Window, int(m.Slots), m.Floor, c)
}

func newDoubleChecked(c budget.Clock) budget.Budget {
	m := model.SRE()
	return NewDoubleCheckedRatio(m.PPM, m.Window, int(m.Slots), m.Floor, c)
}

func newSplitInFlight(budget.Clock) budget.Budget {
	m := model.EnvoyDefaults()
	return NewSplitAtomicsInFlight(m.PPM, m.MinConcurrency)
}

func newCachedDeny(budget.Clock) budget.Budget {
	m := model.AWS()
	return NewCachedDenyBucket(m.Capacity, m.TransientCost, m.ThrottledCost, m.SuccessBonus)
}

func newLazyRing(c budget.Clock) budget.Budget {
	m := model.SRE()
	return NewLazyRingRatio(m.PPM, m.Window, int(m.Slots), m.Floor, c)
}

// A broken is one broken budget with the file whose lines its failure
// must name.
type broken struct {
	name, file string
	verify     func(t *testing.T) error
}

func brokenOf[S any](name, file string, m model.Model[S], build func(budget.Clock) budget.Budget) broken {
	sub := budgettest.Subject[S]{Name: name, Model: m, New: func(t *testing.T, c budget.Clock) budget.Budget { return build(c) }}
	return broken{name: name, file: file, verify: func(t *testing.T) error { return budgettest.Verify(t, sub) }}
}

func brokenBudgets() []broken {
	return []broken{
		brokenOf("AddClampBucket", "addclamp.go", model.AWS(), newAddClamp),
		brokenOf("RefundClampBucket", "refundclamp.go", smallBucket, newRefundClamp),
		brokenOf("CASThrottle", "casthrottle.go", grpcThrottle, newCASThrottle),
		brokenOf("CASBucket2", "casbucket2.go", model.AWS(), newCASBucket2),
		brokenOf("RotateOutsideLockRatio", "rotateoutside.go", model.SRE(), newRotateOutside),
		brokenOf("DoubleCheckedRatio", "doublechecked.go", model.SRE(), newDoubleChecked),
		brokenOf("SplitAtomicsInFlight", "splitinflight.go", model.EnvoyDefaults(), newSplitInFlight),
		brokenOf("CachedDenyBucket", "cacheddeny.go", model.AWS(), newCachedDeny),
		brokenOf("LazyRingRatio", "lazyring.go", model.SRE(), newLazyRing),
	}
}

// named matches a line of the failure that names a place in one of this
// module's files: "is preempted at ring.go:67 in ...". The bug's own file
// need not be the one: a goroutine may be stopped at a helper it calls on
// the way (internal.go's cost), which is still a line of the team's.
func named(file string) *regexp.Regexp {
	files := []string{regexp.QuoteMeta(file)}
	entries, _ := os.ReadDir(".")
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			files = append(files, regexp.QuoteMeta(n))
		}
	}
	return regexp.MustCompile(`(preempted|resumes) at (` + strings.Join(files, "|") + `):\d+`)
}

// TestBroken puts every broken budget through the suite, as a team's gate
// would, on plain go test: each must be caught, by the Linearizable check
// (a lost update or stale read is a concurrent history no order explains),
// and its failure must tell where the calls met in this module's own
// lines and give a replay, which, run as a team would run it, fails the
// same way. Under -race a data race is reported by the
// detector too; only the catch is asked for then.
func TestBroken(t *testing.T) {
	for _, b := range brokenBudgets() {
		t.Run(b.name, func(t *testing.T) {
			if raceEnabled && os.Getenv(childEnv) == "" {
				inChild(t, b.name)
				return
			}
			err := b.verify(t)
			if err == nil {
				t.Fatalf("%s escaped", b.name)
			}
			msg := err.Error()
			if raceEnabled {
				t.Logf("CAUGHT: %s", strings.SplitN(msg, "\n", 2)[0])
				return
			}
			if !strings.Contains(msg, "every concurrent history has an order") {
				t.Fatalf("caught, but not by Linearizable:\n%s", msg)
			}
			if !named(b.file).MatchString(msg) {
				t.Errorf("the failure names no line of %s:\n%s", b.file, msg)
			}
			if !strings.Contains(msg, "replay it with: -budgettest.replay=") {
				t.Errorf("the failure gives no replay:\n%s", msg)
			}
			if os.Getenv(replayEnv) != "" {
				t.Logf("REPLAYED:\n%s", msg)
				return
			}
			replays(t, b.name, b.file, msg)
		})
	}
}

// replayEnv marks a child process of TestBroken that replays a failure.
const replayEnv = "LOSTUPDATES_REPLAY"

var replayFlag = regexp.MustCompile(`replay it with: (-budgettest\.replay=\S+)`)

// replays runs the replay a failure gives, as a team would (the test
// again, with the flag added), and asks that it fail the same way: not
// linearizable, with the calls meeting at the same line of file.
func replays(t *testing.T, name, file, msg string) {
	m := replayFlag.FindStringSubmatch(msg)
	met := named(file).FindString(msg)
	if m == nil || met == "" {
		return // reported above
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBroken$/^"+regexp.QuoteMeta(name)+"$", "-test.v", "-test.count=1", m[1])
	cmd.Env = append(os.Environ(), replayEnv+"=1")
	out, _ := cmd.CombinedOutput()
	_, got, ok := strings.Cut(string(out), "REPLAYED:")
	if !ok || !strings.Contains(got, "not linearizable") || !strings.Contains(got, met) {
		t.Errorf("%s: the replay %s does not fail the same way (not linearizable, the calls meeting where they did: %q); the replay said:\n%s", name, m[1], met, out)
	}
}

// childEnv marks a child process of TestBroken under -race.
const childEnv = "LOSTUPDATES_CHILD"

// inChild verifies one broken budget in a child process, under -race: the
// detector fails the test that made a data race whatever Verify returns,
// so a race report counts as a catch as well as the suite's failure.
func inChild(t *testing.T, name string) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBroken$/^"+regexp.QuoteMeta(name)+"$", "-test.v", "-test.count=1", "-test.timeout=20m")
	// The child need not wait the race detector's default second at exit.
	cmd.Env = append(os.Environ(), childEnv+"=1", "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	out, _ := cmd.CombinedOutput()
	caught := strings.Contains(string(out), "CAUGHT: ")
	if n := strings.Count(string(out), "WARNING: DATA RACE"); n > 0 {
		caught = true
		t.Logf("the race detector reported %d races", n)
	}
	if !caught {
		t.Errorf("%s escaped under -race; the child said:\n%s", name, out)
	}
}

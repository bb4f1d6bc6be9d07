package mutants_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/mutants"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/sim"
	"github.com/retrybudget/retrybudget/stress"
)

var (
	catchRuns = flag.Int("catch-runs", 3, "times each mutant is caught by its check, for the median time to catch")
	refReps   = flag.Int("ref-reps", 20, "repetitions of every check on every reference budget")
)

// An impl is one row of the kill matrix: a way to run each check on one
// implementation.
type impl struct {
	name     string
	mustFail mutants.Check // "" for a reference budget, which must pass everything
	racy     bool          // run only in a child process
	// seq runs one sequential property; lin records and checks one scenario.
	seq func(*rapid.T)
	lin func(seed uint64) (linearizability.Verdict, string, error)
	// render writes the HTML rendering of the last violation lin found to
	// t.ArtifactDir() and returns its path.
	render func(t *testing.T) string
	// amp runs sim.CheckAmplification.
	amp func(t *testing.T) error
}

func ampCheck[S any](newB func(budget.Clock) budget.Budget, m model.Model[S]) func(t *testing.T) error {
	return func(t *testing.T) error {
		_, _, err := sim.CheckAmplification(t, newB, m)
		return err
	}
}

const linTimeout = 20 * time.Second

// lastViolation keeps the last violation a row's linearizability check
// found, for rendering.
type lastViolation struct {
	render func(t *testing.T, name string) string
}

func linTrial[S any](sub linearizability.Subject[S], seed uint64, last *lastViolation) (linearizability.Verdict, string, error) {
	s := linearizability.Generate(rand.New(rand.NewPCG(seed, 7)), sub.Gen)
	ctx, cancel := context.WithTimeout(context.Background(), linTimeout)
	defer cancel()
	r, err := linearizability.Trial(ctx, sub, s, linTimeout)
	if err != nil {
		return 0, "", err
	}
	if r.Verdict == linearizability.Violation && last != nil {
		last.render = func(t *testing.T, name string) string {
			spec, _ := linearizability.Spec(sub.Model)
			return linearizability.Report(t, r, spec, name, name)
		}
	}
	return r.Verdict, r.Explain(), nil
}

// Parameters for the linearizability check: small budgets, so that
// concurrent calls meet at the boundaries.
var (
	linBuckets = []model.TokenBucket{
		{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000},
		{Capacity: 50_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000},
		{Capacity: 3_000, TransientCost: 1_000, ThrottledCost: 1_000, SuccessBonus: 0},
	}
	linRefillBuckets = []model.TokenBucket{
		{Capacity: 30_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 10_000},
		{Capacity: 5_000, TransientCost: 1_000, ThrottledCost: 1_000, RefillPerSecond: 100_000},
	}
	linRatio    = model.Ratio{PPM: 100_000, Window: 10 * time.Second, Slots: 10, Floor: 3}
	linThrottle = model.Throttle{Max: 10_000, Ratio: 500}
)

func bucketImpl(name string, must mutants.Check, refill mutants.Refill, newB func(model.TokenBucket, budget.Clock) budget.Budget, balance bool) impl {
	last := new(lastViolation)
	aws := model.AWS()
	return impl{
		name:     name,
		mustFail: must,
		render:   func(t *testing.T) string { return renderLast(t, last, name) },
		amp:      ampCheck(func(c budget.Clock) budget.Budget { return newB(aws, c) }, aws),
		seq: func(t *rapid.T) {
			m := seqcheck.DrawTokenBucket(t, refill != mutants.NoRefill)
			if refill == mutants.RequiresRefill && m.RefillPerSecond == 0 {
				m.RefillPerSecond = rapid.Int64Range(1, 10_000_000).Draw(t, "refillPerSecond")
			}
			sub := seqcheck.Subject[model.TokenBucketState]{
				Model:  m,
				New:    func(c budget.Clock) budget.Budget { return newB(m, c) },
				Timing: seqcheck.TokenBucketTiming(m),
			}
			if balance {
				sub.Balance = m.Balance
			}
			seqcheck.Check(t, sub, nil)
		},
		lin: func(seed uint64) (linearizability.Verdict, string, error) {
			var m model.TokenBucket
			switch {
			case refill == mutants.NoRefill:
				m = linBuckets[seed%uint64(len(linBuckets))]
			case refill == mutants.RequiresRefill || seed%2 == 0:
				m = linRefillBuckets[seed%uint64(len(linRefillBuckets))]
			default:
				m = linBuckets[seed%uint64(len(linBuckets))]
			}
			tm := seqcheck.TokenBucketTiming(m)
			return linTrial(linearizability.Subject[model.TokenBucketState]{
				Model: m,
				New:   func(c budget.Clock) budget.Budget { return newB(m, c) },
				Gen:   linearizability.GenConfig{Scale: tm.Scale, Horizon: tm.Horizon},
			}, seed, last)
		},
	}
}

func ratioImpl(name string, must mutants.Check, newB func(model.Ratio, budget.Clock) budget.Budget) impl {
	last := new(lastViolation)
	return impl{
		name:     name,
		mustFail: must,
		render:   func(t *testing.T) string { return renderLast(t, last, name) },
		amp:      ampCheck(func(c budget.Clock) budget.Budget { return newB(model.SRE(), c) }, model.SRE()),
		seq: func(t *rapid.T) {
			m := seqcheck.DrawRatio(t)
			seqcheck.Check(t, seqcheck.Subject[model.RatioState]{
				Model: m, New: func(c budget.Clock) budget.Budget { return newB(m, c) }, Timing: seqcheck.RatioTiming(m),
			}, nil)
		},
		lin: func(seed uint64) (linearizability.Verdict, string, error) {
			tm := seqcheck.RatioTiming(linRatio)
			return linTrial(linearizability.Subject[model.RatioState]{
				Model: linRatio,
				New:   func(c budget.Clock) budget.Budget { return newB(linRatio, c) },
				Gen:   linearizability.GenConfig{Scale: tm.Scale, Horizon: tm.Horizon},
			}, seed, last)
		},
	}
}

func throttleImpl(name string, must mutants.Check, newB func(model.Throttle, budget.Clock) budget.Budget, balance bool) impl {
	last := new(lastViolation)
	grpc := model.Throttle{Max: 10_000, Ratio: 100}
	return impl{
		name:     name,
		mustFail: must,
		render:   func(t *testing.T) string { return renderLast(t, last, name) },
		amp:      ampCheck(func(c budget.Clock) budget.Budget { return newB(grpc, c) }, grpc),
		seq: func(t *rapid.T) {
			m := seqcheck.DrawThrottle(t)
			sub := seqcheck.Subject[model.ThrottleState]{Model: m, New: func(c budget.Clock) budget.Budget { return newB(m, c) }}
			if balance {
				sub.Balance = m.Balance
			}
			seqcheck.Check(t, sub, nil)
		},
		lin: func(seed uint64) (linearizability.Verdict, string, error) {
			return linTrial(linearizability.Subject[model.ThrottleState]{
				Model: linThrottle,
				New:   func(c budget.Clock) budget.Budget { return newB(linThrottle, c) },
			}, seed, last)
		},
	}
}

func renderLast(t *testing.T, last *lastViolation, name string) string {
	if last.render == nil {
		return ""
	}
	return last.render(t, name)
}

func references() []impl {
	return []impl{
		bucketImpl("budget.TokenBucket", "", mutants.AnyRefill, func(m model.TokenBucket, c budget.Clock) budget.Budget {
			return seqcheck.NewTokenBucket(m)(c)
		}, true),
		ratioImpl("budget.Ratio", "", func(m model.Ratio, c budget.Clock) budget.Budget { return seqcheck.NewRatio(m)(c) }),
		throttleImpl("budget.Throttle", "", func(m model.Throttle, c budget.Clock) budget.Budget { return seqcheck.NewThrottle(m)(c) }, true),
	}
}

func mutantImpls() []impl {
	var out []impl
	for _, m := range mutants.Budgets() {
		var i impl
		switch {
		case m.TokenBucket != nil:
			i = bucketImpl(m.Name, m.CaughtBy, m.Refill, m.TokenBucket, false)
		case m.Ratio != nil:
			i = ratioImpl(m.Name, m.CaughtBy, m.Ratio)
		default:
			i = throttleImpl(m.Name, m.CaughtBy, m.Throttle, false)
		}
		i.racy = m.CaughtBy == mutants.Race
		out = append(out, i)
	}
	return out
}

// A cell is one check of one implementation.
type cell struct {
	ran      bool
	verdict  string // "caught", "pass", "inconclusive", "error"
	times    []time.Duration
	detail   string
	artifact string // the HTML rendering of a violation
}

func (c cell) String() string {
	if !c.ran {
		return "-"
	}
	return fmt.Sprintf("%s %v", c.verdict, median(c.times).Round(time.Millisecond))
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// runSequential runs the rapid property once (100 checks by default).
func runSequential(t *testing.T, i impl) (caught bool, report string, d time.Duration) {
	start := time.Now()
	report, failed := seqcheck.Falsify(t, i.seq)
	return failed, report, time.Since(start)
}

// runLinearizable tries scenarios from seed first until one is a violation,
// for at most n scenarios. An inconclusive check stops the search: it is
// neither a catch nor a pass.
func runLinearizable(i impl, first uint64, n int) (verdict string, detail string, d time.Duration) {
	start := time.Now()
	for seed := first; seed < first+uint64(n); seed++ {
		v, explain, err := i.lin(seed)
		switch {
		case err != nil:
			return "error", err.Error(), time.Since(start)
		case v == linearizability.Violation:
			return "caught", fmt.Sprintf("seed %d:\n%s", seed, explain), time.Since(start)
		case v == linearizability.Inconclusive:
			return "inconclusive", fmt.Sprintf("seed %d: %s", seed, explain), time.Since(start)
		}
	}
	return "pass", "", time.Since(start)
}

// childEnv names the mutant a child process runs.
const childEnv = "RETRYBUDGET_RACY_MUTANT"

// TestRacyMutantChild runs in a child process only: it records and checks
// scenarios of the racy mutant named by its environment, so that the race
// detector (with -race) or the linearizability check can fail it without
// failing the parent.
func TestRacyMutantChild(t *testing.T) {
	name := os.Getenv(childEnv)
	if name == "" {
		t.Skip("runs only as a child of TestKillMatrix")
	}
	for _, i := range mutantImpls() {
		if i.name == name {
			v, detail, _ := runLinearizable(i, 1, 200)
			if v != "pass" {
				t.Errorf("linearizability check: %s\n%s", v, detail)
			}
			return
		}
	}
	t.Fatalf("no mutant %q", name)
}

// runChild runs the racy mutant in a child process and classifies how it
// failed.
func runChild(t *testing.T, name string) (verdict, detail string, d time.Duration) {
	start := time.Now()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRacyMutantChild$", "-test.v", "-test.count=1")
	cmd.Env = append(stress.ChildEnv(), childEnv+"="+name)
	out, err := cmd.CombinedOutput()
	d = time.Since(start)
	text := string(out)
	switch {
	case strings.Contains(text, "WARNING: DATA RACE"):
		return "caught", "the race detector reported a data race", d
	case err != nil && strings.Contains(text, "not linearizable"):
		return "caught", "the linearizability check found a lost update (build without -race)", d
	case err != nil:
		return "error", text, d
	}
	return "pass", text, d
}

func TestKillMatrix(t *testing.T) {
	checks := []mutants.Check{mutants.Sequential, mutants.Linearizable, mutants.Race, mutants.Amplification}
	rows := append(references(), mutantImpls()...)
	matrix := make(map[string]map[mutants.Check]*cell)
	for _, i := range rows {
		matrix[i.name] = map[mutants.Check]*cell{}
		for _, c := range checks {
			matrix[i.name][c] = &cell{}
		}
	}

	for _, i := range rows {
		if i.mustFail == "" {
			// A reference budget must pass every check, every time. The
			// amplification check is deterministic: once is enough.
			amp := matrix[i.name][mutants.Amplification]
			amp.ran, amp.verdict = true, "pass"
			start := time.Now()
			if err := i.amp(t); err != nil {
				amp.verdict = "caught"
				t.Errorf("%s failed the amplification check: %v", i.name, err)
			}
			amp.times = []time.Duration{time.Since(start)}
			seq, lin := matrix[i.name][mutants.Sequential], matrix[i.name][mutants.Linearizable]
			seq.ran, lin.ran = true, true
			seq.verdict, lin.verdict = "pass", "pass"
			for rep := range *refReps {
				caught, report, d := runSequential(t, i)
				seq.times = append(seq.times, d)
				if caught {
					seq.verdict = "caught"
					t.Errorf("%s failed the sequential check (repetition %d):\n%s", i.name, rep+1, report)
					break
				}
				v, detail, d := runLinearizable(i, uint64(rep)*20+1, 20)
				lin.times = append(lin.times, d)
				if v != "pass" {
					lin.verdict = v
					t.Errorf("%s: linearizability check %s (repetition %d):\n%s", i.name, v, rep+1, detail)
					break
				}
			}
			continue
		}
		if i.racy {
			c := matrix[i.name][mutants.Race]
			c.ran = true
			for range *catchRuns {
				v, detail, d := runChild(t, i.name)
				c.verdict, c.detail = v, detail
				c.times = append(c.times, d)
				if v != "caught" {
					break
				}
			}
			if c.verdict != "caught" {
				t.Errorf("%s escaped %s: %s\n%s", i.name, i.mustFail, c.verdict, c.detail)
			} else {
				t.Logf("%s: %s", i.name, c.detail)
			}
			continue
		}
		// The designated check must catch the mutant every time.
		c := matrix[i.name][i.mustFail]
		c.ran = true
		for run := range *catchRuns {
			var verdict, detail string
			var d time.Duration
			switch i.mustFail {
			case mutants.Sequential:
				caught, report, dd := runSequential(t, i)
				verdict, detail, d = "pass", report, dd
				if caught {
					verdict = "caught"
				}
			case mutants.Amplification:
				start := time.Now()
				verdict = "pass"
				if err := i.amp(t); err != nil {
					verdict, detail = "caught", err.Error()
				}
				d = time.Since(start)
			default:
				verdict, detail, d = runLinearizable(i, uint64(run)*5000+1, 5000)
			}
			c.verdict, c.detail = verdict, detail
			c.times = append(c.times, d)
			if verdict != "caught" {
				break
			}
		}
		if c.verdict != "caught" {
			t.Errorf("%s escaped the %s check: %s\n%s", i.name, i.mustFail, c.verdict, c.detail)
		} else if i.mustFail == mutants.Linearizable {
			c.artifact = i.render(t)
		}
		// The other checks run once, for the record: a sequential bug is
		// usually visible to the linearizability check too, and a
		// concurrency bug never to the sequential one.
		for _, other := range []mutants.Check{mutants.Sequential, mutants.Linearizable, mutants.Amplification} {
			if other == i.mustFail {
				continue
			}
			o := matrix[i.name][other]
			o.ran = true
			switch other {
			case mutants.Sequential:
				caught, _, d := runSequential(t, i)
				o.verdict, o.times = "pass", []time.Duration{d}
				if caught {
					o.verdict = "caught"
				}
			case mutants.Amplification:
				start := time.Now()
				o.verdict = "pass"
				if err := i.amp(t); err != nil {
					o.verdict = "caught"
				}
				o.times = []time.Duration{time.Since(start)}
			default:
				v, _, d := runLinearizable(i, 1, 50)
				o.verdict, o.times = v, []time.Duration{d}
			}
		}
	}

	for _, i := range rows {
		for _, c := range checks {
			cl := matrix[i.name][c]
			if !cl.ran {
				continue
			}
			detail := ""
			if i.mustFail == c {
				detail = cl.detail
			}
			emit(t, Cell{Matrix: "budgets", Impl: i.name, Check: string(c), Verdict: cl.verdict, Must: i.mustFail == c,
				Mutant: i.mustFail != "", Seconds: seconds(median(cl.times)), Detail: firstLines(detail, 12), Artifact: cl.artifact})
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "kill matrix (cells: verdict, median time; * marks the check that must catch the row; mutants caught %d times each, references repeated %d times)\n", *catchRuns, *refReps)
	fmt.Fprintf(&b, "%-20s %-24s %-24s %-24s %-24s\n", "implementation", checks[0], checks[1], checks[2], checks[3])
	for _, i := range rows {
		fmt.Fprintf(&b, "%-20s", i.name)
		for _, c := range checks {
			s := matrix[i.name][c].String()
			if c == i.mustFail {
				s += " *"
			}
			fmt.Fprintf(&b, " %-24s", s)
		}
		b.WriteByte('\n')
	}
	t.Log("\n" + b.String())
}

// firstLines returns at most n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}

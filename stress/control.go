package stress

import (
	"flag"
	"hash/fnv"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/retrybudget/retrybudget/yield"
)

var (
	loopSchedules = flag.Int("stress.schedules", 6, "schedules that each case of the loop checks with goroutines of their own (NoGoroutineOutlivesCall, SharedBudgetRespected, IgnoringOpEndsTheCall, EveryStartEnds) explores when the loop's code is instrumented (cmd/budgetcheck); 0 runs them once, freely")
	loopSeed      = flag.Uint64("stress.seed", 1, "the seed base of the schedules the loop checks explore: a failure names it, and the same base replays the same schedules")
)

// childFlags are the flags a child process gets besides its -test.* ones:
// the control flags' values as they are now, and every other flag set on
// the command line, so that a test that reads its own flags makes the
// same calls in the child as in the parent.
func childFlags() []string {
	out := []string{"-stress.schedules=" + strconv.Itoa(*loopSchedules), "-stress.seed=" + strconv.FormatUint(*loopSeed, 10)}
	flag.Visit(func(f *flag.Flag) {
		if !strings.HasPrefix(f.Name, "test.") && !strings.HasPrefix(f.Name, "stress.") {
			out = append(out, "-"+f.Name+"="+f.Value.String())
		}
	})
	return out
}

// schedules returns the options of the runs a case of a loop check makes:
// under control (the code is instrumented and -stress.schedules is
// positive), one per schedule, PCT and the random walk in turn, each with a
// seed drawn from the seed base and the case's name; otherwise one nil,
// for one free run.
//
// The loop's goroutines (a hedge's attempts, a watcher of ctx) and the
// calls of one check then run one at a time, and the choice at each of the
// loop's synchronization points comes from the seed. What the loop races
// against outside its code, the clock of the testing/synctest bubble, a
// context's timer, runs as it does without control.
func schedules(name string) []*yield.Options {
	if !yield.Instrumented() || *loopSchedules <= 0 {
		return []*yield.Options{nil}
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	var out []*yield.Options
	for i := range *loopSchedules {
		st := yield.PCT(3)
		if i%2 == 1 {
			st = yield.Walk()
		}
		out = append(out, &yield.Options{Seed: *loopSeed*1_000_003 + h.Sum64() + uint64(i), Strategy: st, Length: 200})
	}
	return out
}

// explain, on a failure of t under control, says which schedule it was in
// and how to run it again.
func explain(t *testing.T, k int, rep yield.Report) {
	t.Helper()
	if t.Failed() {
		t.Logf("under control, schedule %d of %d (-stress.seed=%d -stress.schedules=%d replays it): %v", k+1, *loopSchedules, *loopSeed, *loopSchedules, rep)
	}
}

// eachSchedule runs body in a testing/synctest bubble once for each of the
// schedules of name, stopping at the first that fails. Body returns false
// when its controlled run fell back to free running and it judged nothing
// (see fellBack); that schedule is then run once more, free.
func eachSchedule(t *testing.T, name string, body func(t *testing.T, ctl *yield.Options, k int) bool) {
	t.Helper()
	for k, ctl := range schedules(name) {
		judged := true
		synctest.Test(t, func(t *testing.T) { judged = body(t, ctl, k) })
		if !judged && !t.Failed() {
			synctest.Test(t, func(t *testing.T) { body(t, nil, k) })
		}
		if t.Failed() {
			return
		}
	}
}

// fellBack reports whether the controlled run rep fell back to free
// running before its end, and if so logs it. A goroutine under control
// that blocks outside instrumented code (a range over a channel, a
// syscall) stops the others until the fallback; inside a bubble the clock
// moves meanwhile, so what the check measures is then the fallback's, not
// the loop's: it judges nothing, and the case runs again, free.
func fellBack(t *testing.T, k int, rep yield.Report) bool {
	t.Helper()
	if !rep.Free || rep.Reason == "" {
		return false
	}
	t.Logf("schedule %d of %d fell back to free running (%s), which moves a bubble's clock: the case runs again, free", k+1, *loopSchedules, rep.Reason)
	return true
}

// explainRun is explain for the call r made, if it ran under control.
func explainRun(t *testing.T, k int, r *recorder) {
	t.Helper()
	if rep, ran := r.runReport(); ran {
		explain(t, k, rep)
	}
}

// fellBackRun is fellBack for the call r made, if it ran under control.
func fellBackRun(t *testing.T, k int, r *recorder) bool {
	t.Helper()
	rep, ran := r.runReport()
	return ran && fellBack(t, k, rep)
}

// controlled runs fs as a controlled run under o, or as plain goroutines
// when o is nil, and returns when all have returned.
func controlled(o *yield.Options, fs ...func()) yield.Report {
	if o != nil {
		return yield.Run(*o, fs...)
	}
	done := make(chan struct{}, len(fs))
	for _, f := range fs {
		go func() {
			defer func() { done <- struct{}{} }()
			f()
		}()
	}
	for range fs {
		<-done
	}
	return yield.Report{}
}

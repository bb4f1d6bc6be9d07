package stress

import (
	"flag"
	"os"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/retrybudget/retrybudget/internal/control"
	"github.com/retrybudget/retrybudget/internal/sched"
)

// childFlags are the flags a child process gets besides its -test.* ones:
// the control flags' values as they are now (package internal/control,
// the one policy of controlled runs), and every other flag set on the
// command line, so that a test that reads its own flags makes the same
// calls in the child as in the parent.
func childFlags() []string {
	out := control.Flags()
	flag.Visit(func(f *flag.Flag) {
		if !strings.HasPrefix(f.Name, "test.") && !strings.HasPrefix(f.Name, "stress.") && !strings.HasPrefix(f.Name, "budgettest.") {
			out = append(out, "-"+f.Name+"="+f.Value.String())
		}
	})
	return out
}

// scheduledChecks are the loop checks whose cases run goroutines of their
// own, and so explore schedules under control.
var scheduledChecks = []string{"NoGoroutineOutlivesCall", "SharedBudgetRespected", "IgnoringOpEndsTheCall", "EveryStartEnds"}

// loopSchedule is the length of a loop case's schedule, in yield points.
const loopSchedule = 200

// schedules returns the options of the runs a case of a loop check makes:
// under control (the code is instrumented and -budgettest.schedules is
// positive), one per schedule, each drawn from the seed base and the
// case's name (package internal/control's policy); otherwise one nil, for
// one free run.
//
// The loop's goroutines (a hedge's attempts, a watcher of ctx) and the
// calls of one check then run one at a time, and the choice at each of the
// loop's synchronization points comes from the seed. What the loop races
// against outside its code, the clock of the testing/synctest bubble, a
// context's timer, runs as it does without control.
func schedules(name string) []*sched.Options {
	if !control.Controlled() {
		return []*sched.Options{nil}
	}
	var out []*sched.Options
	for i := range control.Schedules() {
		o := control.Named(name, i, loopSchedule)
		out = append(out, &o)
	}
	if os.Getenv(controlledStageEnv) == "" {
		// Instrumented in-process (cmd/budgetcheck): no parent made the
		// free run, whose clock judges what control cannot (a denied
		// call's prompt return), so it comes after the schedules.
		out = append(out, nil)
	}
	return out
}

// controlledStageEnv marks a child that runs a check's controlled stage
// for a parent that ran it freely first.
const controlledStageEnv = "RETRYBUDGET_LOOP_CONTROLLED_STAGE"

// explain, on a failure of t under control, says which schedule it was in
// and how to run it again.
func explain(t *testing.T, k int, rep sched.Report) {
	t.Helper()
	if t.Failed() {
		t.Logf("under control, schedule %d of %d (%s replays it): %v", k+1, control.Schedules(), control.Describe(), rep)
	}
}

// eachSchedule runs body in a testing/synctest bubble once for each of the
// schedules of name, stopping at the first that fails. Body returns false
// when its controlled run fell back to free running and it judged nothing
// (see fellBack); that schedule is then run once more, free.
func eachSchedule(t *testing.T, name string, body func(t *testing.T, ctl *sched.Options, k int) bool) {
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
func fellBack(t *testing.T, k int, rep sched.Report) bool {
	t.Helper()
	if !rep.Free || rep.Reason == "" {
		return false
	}
	t.Logf("schedule %d of %d fell back to free running (%s), which moves a bubble's clock: the case runs again, free", k+1, control.Schedules(), rep.Reason)
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
func controlled(o *sched.Options, fs ...func()) sched.Report {
	if o != nil {
		return sched.Run(*o, fs...)
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
	return sched.Report{}
}

package seqcheck

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// ExpectFailure runs rapid.Check on prop and returns what it reported. It
// fails t if the property held: use it to show that a check catches a broken
// implementation. It changes the working directory of t to a temporary one,
// so that the fail file rapid writes does not land in the source tree; the
// calling test must therefore not be parallel.
func ExpectFailure(t *testing.T, prop func(*rapid.T)) string {
	t.Helper()
	report, failed := Falsify(t, prop)
	if !failed {
		t.Fatalf("the check passed; it should have caught the broken implementation")
	}
	return report
}

// Falsify runs rapid.Check on prop without failing t, and returns rapid's
// report and whether the property failed. Like ExpectFailure, it moves t to
// a temporary working directory.
func Falsify(t *testing.T, prop func(*rapid.T)) (report string, failed bool) {
	t.Helper()
	t.Chdir(t.TempDir())
	return FalsifyHere(t, prop)
}

// FalsifyHere is Falsify without the change of directory: on a failure
// rapid writes its fail file under testdata/rapid in the working directory,
// for -rapid.failfile to replay. It is safe in parallel tests.
func FalsifyHere(t testing.TB, prop func(*rapid.T)) (report string, failed bool) {
	t.Helper()
	r := &recorder{name: t.Name()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rapid.Check(r, prop)
	}()
	<-done
	return r.String(), r.Failed()
}

// recorder is a rapid.TB that records failures instead of failing a test.
// FailNow ends the calling goroutine, as testing.T's does.
type recorder struct {
	name   string
	mu     sync.Mutex
	failed bool
	log    strings.Builder
}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return r.name }
func (r *recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.log, format+"\n", args...)
}
func (r *recorder) Log(args ...any)                   { r.Logf("%s", fmt.Sprint(args...)) }
func (r *recorder) Skipf(format string, args ...any)  { r.Logf(format, args...); runtime.Goexit() }
func (r *recorder) Skip(args ...any)                  { r.Log(args...); runtime.Goexit() }
func (r *recorder) SkipNow()                          { runtime.Goexit() }
func (r *recorder) Errorf(format string, args ...any) { r.Logf(format, args...); r.Fail() }
func (r *recorder) Error(args ...any)                 { r.Log(args...); r.Fail() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); r.FailNow() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); r.FailNow() }
func (r *recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *recorder) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.String()
}

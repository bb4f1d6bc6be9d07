package unseen

import (
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budgettest"
)

// TestStoryInOwnLines checks that a controlled failure tells where the
// calls met in this module's own files, without -race: the line where a
// goroutine was preempted, its source, and the answer the model expected.
func TestStoryInOwnLines(t *testing.T) {
	if raceEnabled {
		t.Skip("under -race the free stage's race reports speak first; the story is the controlled stage's")
	}
	for _, tt := range []struct {
		e    entry
		file string
	}{
		{entryOf(LoadAddBucketSubject()), "loadadd_bucket.go"},
		{entryOf(LazyThrottleSubject()), "lazy_throttle.go"},
		{entryOf(CheckThenActInFlightSubject()), "checkthenact_inflight.go"},
		{entryOf(ComposedLocksRatioSubject()), "composedlocks_ratio.go"},
	} {
		t.Run(tt.e.name, func(t *testing.T) {
			err := tt.e.check(t, budgettest.CheckLinearizable)
			if err == nil {
				t.Fatal("not caught")
			}
			msg := err.Error()
			for _, want := range []string{
				"how the calls met, switch by switch",
				"is preempted at " + tt.file + ":",
				"resumes at " + tt.file + ":",
				"<- the model answers",
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("the failure lacks %q:\n%s", want, msg)
				}
			}
		})
	}
}

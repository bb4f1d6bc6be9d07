package budgettest

import (
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/stress"
)

// RunLoop refuses, before any subtest, a loop with no Call and one whose
// Skip names no check, naming the mistake.
func TestLoopErrNamesTheMistake(t *testing.T) {
	ok := stress.RetrierLoop()
	if err := loopErr(ok); err != nil {
		t.Errorf("loopErr(RetrierLoop()) = %v, want nil", err)
	}
	typo := ok
	typo.Skip = map[string]string{"HedgeLoserCancelled": "does not hedge"}
	for _, c := range []struct {
		l    stress.Loop
		says string
	}{
		{stress.Loop{Name: "NoCall"}, `loop "NoCall" has a nil Call`},
		{typo, `skips unknown check "HedgeLoserCancelled"; the checks are NoAttemptOnDoneContext`},
	} {
		err := loopErr(c.l)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("loopErr(%s) = %v, want an error saying %q", c.l.Name, err, c.says)
		}
	}
}

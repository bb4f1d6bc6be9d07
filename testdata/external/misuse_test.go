package external

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/stress"
)

// misuseEnv names the misuse a child of TestMisuseGivesANamedFailure makes.
const misuseEnv = "EXTERNAL_MISUSE"

// What a team gets wrong in its first hour gives one failure that names
// the mistake, and no crash: a loop with no Call, and a subject with no
// factory.
func TestMisuseGivesANamedFailure(t *testing.T) {
	switch os.Getenv(misuseEnv) {
	case "nil Call":
		budgettest.RunLoop(t, stress.Loop{Name: "NoCall"})
		return
	case "nil New":
		budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{Name: "NoFactory", Model: model.AWS()})
		return
	}
	for _, c := range []struct{ misuse, says string }{
		{"nil Call", `loop "NoCall" has a nil Call`},
		{"nil New", "NoFactory: Subject.New is nil"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), misuseEnv+"="+c.misuse)
		out, err := cmd.CombinedOutput()
		text := string(out)
		if err == nil {
			t.Errorf("%s: the test passed:\n%s", c.misuse, text)
		}
		if !strings.Contains(text, c.says) {
			t.Errorf("%s: the failure does not say %q:\n%s", c.misuse, c.says, text)
		}
		for _, bad := range []string{"SIGSEGV", "nil pointer dereference", "goroutine 1 [", "child process died"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s: a crash (%q) instead of a named failure:\n%s", c.misuse, bad, text)
			}
		}
		if n := strings.Count(text, "--- FAIL"); n > 2 {
			t.Errorf("%s: %d failures for one mistake:\n%s", c.misuse, n, text)
		}
	}
}

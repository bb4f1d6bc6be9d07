package external

import (
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

// quota is what Quota and FastQuota share.
type quota interface {
	Acquire(cost int) bool
	Release(n int)
}

// adapter maps the Budget contract onto a quota: 14 tokens a transient
// retry, 5 a throttled one, 1 back for a first-attempt success.
type adapter struct{ q quota }

func cost(k budget.Kind) int {
	if k == budget.Throttled {
		return 5
	}
	return 14
}

func (a adapter) Request()                 {}
func (a adapter) Retry(k budget.Kind) bool { return k.IsRetry() && a.q.Acquire(cost(k)) }
func (a adapter) Success(k budget.Kind) {
	if k.IsRetry() {
		a.q.Release(cost(k))
	} else {
		a.q.Release(1)
	}
}

func TestQuotaConforms(t *testing.T) {
	budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{
		Name:  "external.Quota",
		Model: model.AWS(),
		New:   func(*testing.T, budget.Clock) budget.Budget { return adapter{NewQuota(500)} },
	})
}

// TestFastQuotaCaughtUnderControl: plain go test gives the controlled
// verdict. The suite rewrites this package, runs the Linearizable check's
// controlled stage in an instrumented child process, and prints the flag
// that replays the schedule that broke FastQuota, on every run.
func TestFastQuotaCaughtUnderControl(t *testing.T) {
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{
		Name:  "external.FastQuota",
		Model: model.AWS(),
		New:   func(*testing.T, budget.Clock) budget.Budget { return adapter{NewFastQuota(500)} },
	}, budgettest.CheckLinearizable)
	if err == nil {
		t.Fatal("the check-then-act in FastQuota.Acquire went unseen")
	}
	if !strings.Contains(err.Error(), "replay it with: -budgettest.replay=") {
		t.Fatalf("FastQuota was caught, but not under control (no schedule to replay):\n%v", err)
	}
	t.Logf("caught under control:\n%v", err)
}

package external

import (
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

// adapter maps the Budget contract onto Quota: 14 tokens a transient retry,
// 5 a throttled one, 1 back for a first-attempt success.
type adapter struct{ q *Quota }

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

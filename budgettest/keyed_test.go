package budgettest_test

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
)

// keyView is one key's budget of a budget.Keyed, reached through Get on
// every call, as a caller keyed by host reaches it; each call first gets
// one of 100 other keys too, so that the checks' calls run among misses
// and hits of other keys on the same Keyed.
type keyView[B budget.Budget] struct {
	k   *budget.Keyed[string, B]
	key string
}

func (v keyView[B]) get() B {
	other := "other-" + strconv.Itoa(rand.IntN(100))
	if _, err := v.k.Get(other); err != nil {
		panic(err)
	}
	b, err := v.k.Get(v.key)
	if err != nil {
		panic(err)
	}
	return b
}

func (v keyView[B]) Request()                 { v.get().Request() }
func (v keyView[B]) Retry(k budget.Kind) bool { return v.get().Retry(k) }
func (v keyView[B]) Success(k budget.Kind)    { v.get().Success(k) }
func (v keyView[B]) Available() float64       { return any(v.get()).(budget.Balancer).Available() }

func newKeyed[B budget.Budget](newB func(budget.Clock) B, c budget.Clock, key string) *budget.Keyed[string, B] {
	k, err := budget.NewKeyed(budget.KeyedConfig[string, B]{New: func(string) (B, error) { return newB(c), nil }})
	if err != nil {
		panic(err)
	}
	if _, err := k.Get(key); err != nil {
		panic(err)
	}
	return k
}

// One key's budget of a Keyed passes the suite as the budget itself does.
func TestKeyedBudgetConforms(t *testing.T) {
	budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{
		Name:  "budget.Keyed[budget.TokenBucket]",
		Model: bucket,
		New: func(_ *testing.T, c budget.Clock) budget.Budget {
			newTB := func(c budget.Clock) *budget.TokenBucket {
				b, err := budget.NewTokenBucket(seqcheck.TokenBucketConfig(bucket, c))
				if err != nil {
					panic(err)
				}
				return b
			}
			return keyView[*budget.TokenBucket]{newKeyed(newTB, c, "api.example.com"), "api.example.com"}
		},
	})
}

package budgettest

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
)

// Keyed returns a factory for [Subject.New] that puts a keyed budget (one
// budget per key, a bounded number of keys held, as [budget.Keyed] holds
// them) through the suite one key at a time, with the keys around it
// coming and going. newKeyed builds an empty keyed budget on clock and
// returns its lookup: the budget of a key. Each budget the suite builds is
// the budget of one key, "key", of a fresh keyed budget; before each of
// its calls it makes a call on each of maxKeys other keys in turn, out of
// maxKeys+1 of them, so that with a bound of maxKeys keys every call makes
// the keyed budget drop one, the key under test as often as any, while
// other calls on it may be in flight. An in-flight budget's calls on the
// other keys end at once (a request, the end of its first attempt, the
// end of the call).
//
// The model of the subject is the rule of one key. Every check then holds
// the key to it while keys are dropped and made again: a keyed budget that
// drops a key a call still holds, and so loses that call's charge or its
// count of calls in flight, grants a retry the model denies. A keyed
// budget whose dropped keys lose their state by design (budget.Keyed's
// token buckets do) fails: give such a one a maxKeys above the number of
// keys the checks use, and the checks hold it to the rule between drops.
//
// The views built do not forward Close or Available: a keyed budget that
// owns goroutines is closed by the test (t.Cleanup in newKeyed), and its
// balance is not compared with the model's.
func Keyed(maxKeys int, newKeyed func(t *testing.T, clock budget.Clock) func(key string) budget.Budget) Factory {
	return func(t *testing.T, clock budget.Clock) budget.Budget {
		switch {
		case maxKeys < 1:
			t.Fatalf("budgettest.Keyed: maxKeys is %d; want the keyed budget's bound on its keys, at least 1", maxKeys)
		case newKeyed == nil:
			t.Fatal("budgettest.Keyed: newKeyed is nil")
		}
		lookup := newKeyed(t, clock)
		if lookup == nil {
			t.Fatal("budgettest.Keyed: newKeyed returned a nil lookup")
		}
		v := &keyedView{lookup: lookup, others: make([]string, maxKeys+1), each: maxKeys}
		for i := range v.others {
			v.others[i] = fmt.Sprintf("other-%d", i)
		}
		if _, ok := lookup(keyedKey).(budget.InFlightBudget); ok {
			return &keyedInFlightView{v}
		}
		return v
	}
}

// keyedKey is the key whose budget a Keyed view is.
const keyedKey = "key"

// A keyedView is the budget of keyedKey, which calls other keys first.
type keyedView struct {
	lookup func(string) budget.Budget
	others []string
	each   int          // other keys called before each call
	next   atomic.Int64 // where the next churn starts among others
}

func (v *keyedView) churn() {
	start := int(v.next.Add(int64(v.each)) % int64(len(v.others)))
	for i := range v.each {
		b := v.lookup(v.others[(start+i)%len(v.others)])
		b.Request()
		if ib, ok := b.(budget.InFlightBudget); ok {
			ib.AttemptEnd(budget.FirstAttempt)
			ib.CallEnd()
		}
	}
}

func (v *keyedView) key() budget.Budget { v.churn(); return v.lookup(keyedKey) }

func (v *keyedView) Request()                    { v.key().Request() }
func (v *keyedView) Retry(kind budget.Kind) bool { return v.key().Retry(kind) }
func (v *keyedView) Success(kind budget.Kind)    { v.key().Success(kind) }

// A keyedInFlightView is a keyedView of an in-flight budget.
type keyedInFlightView struct{ *keyedView }

func (v *keyedInFlightView) AttemptEnd(kind budget.Kind) {
	v.key().(budget.InFlightBudget).AttemptEnd(kind)
}

func (v *keyedInFlightView) CallEnd() { v.key().(budget.InFlightBudget).CallEnd() }

package budgettest_test

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
	t.Parallel()
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

// keyedLookup builds a budget.Keyed of at most maxKeys keys, each built by
// newB, and returns its lookup for budgettest.Keyed.
func keyedLookup[B budget.Budget](t *testing.T, maxKeys int, newB func() (B, error)) func(string) budget.Budget {
	k, err := budget.NewKeyed(budget.KeyedConfig[string, B]{MaxKeys: maxKeys, New: func(string) (B, error) { return newB() }})
	if err != nil {
		t.Fatal(err)
	}
	return func(key string) budget.Budget {
		b, err := k.Get(key)
		if err != nil {
			panic(err)
		}
		return b
	}
}

// budget.Keyed never drops a key whose budget has calls in flight while it
// can drop another: its in-flight budgets, two keys held at most, pass
// every check while every call of the key under test makes it drop one.
func TestKeyedInFlightUnderEvictionConforms(t *testing.T) {
	t.Parallel()
	budgettest.Run(t, budgettest.Subject[model.InFlightState]{
		Name: "budget.Keyed[budget.InFlight], MaxKeys 2", Model: envoy,
		New: budgettest.Keyed(2, func(t *testing.T, _ budget.Clock) func(string) budget.Budget {
			return keyedLookup(t, 2, func() (*budget.InFlight, error) { return budget.NewInFlight(budget.DefaultInFlightConfig()) })
		}),
	})
}

// budget.Keyed's dropped keys lose their state by design: a token bucket
// dropped half spent comes back full. Held to the rule of one bucket while
// keys come and go, it fails at once, as Keyed's documentation says it
// must; with a bound above the keys the checks use, it passes
// (TestKeyedBudgetConforms).
func TestKeyedDropsLoseStateByDesign(t *testing.T) {
	t.Parallel()
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{
		Name: "budget.Keyed[budget.TokenBucket], MaxKeys 2", Model: bucket,
		New: budgettest.Keyed(2, func(t *testing.T, c budget.Clock) func(string) budget.Budget {
			return keyedLookup(t, 2, func() (*budget.TokenBucket, error) {
				return budget.NewTokenBucket(seqcheck.TokenBucketConfig(bucket, c))
			})
		}),
	}, budgettest.CheckSequential)
	if err == nil {
		t.Fatal("a token bucket dropped and made again between calls passed as one bucket")
	}
}

// budgettest.Keyed reports a bound below 1 and a nil constructor or
// lookup as the test's failure, naming the cause, not as a panic. Each
// case runs in a child process of the test binary, where it must fail.
func TestKeyedRejectsBadInput(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		newB func(*testing.T, budget.Clock) budget.Budget
		want string
	}{
		"zero": {budgettest.Keyed(0, func(*testing.T, budget.Clock) func(string) budget.Budget { return nil }), "maxKeys is 0"},
		"nil":  {budgettest.Keyed(2, nil), "newKeyed is nil"},
		"nilLookup": {budgettest.Keyed(2, func(*testing.T, budget.Clock) func(string) budget.Budget { return nil }),
			"returned a nil lookup"},
	}
	if name := os.Getenv("BUDGETTEST_KEYED_CASE"); name != "" {
		cases[name].newB(t, new(budget.ManualClock))
		return
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestKeyedRejectsBadInput$", "-test.count=1")
			cmd.Env = append(os.Environ(), "BUDGETTEST_KEYED_CASE="+name)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "panic:") {
				t.Errorf("the child: %v; want a failure naming %q without a panic:\n%s", err, c.want, out)
			}
		})
	}
}

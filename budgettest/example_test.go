package budgettest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/stress"
)

// quota stands for your own budget: a plain retry quota with its own
// method names.
type quota struct {
	mu     sync.Mutex
	tokens int
}

func (q *quota) Acquire(n int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.tokens < n {
		return false
	}
	q.tokens -= n
	return true
}

func (q *quota) Release(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.tokens = min(q.tokens+n, 500)
}

// myAdapter maps the Budget contract onto quota as the AWS SDK spends its
// retry quota: 14 tokens a transient retry, 5 a throttled one, the cost
// back when the retry succeeds, 1 for a successful first attempt.
type myAdapter struct{ q *quota }

func cost(k budget.Kind) int {
	if k == budget.Throttled {
		return 5
	}
	return 14
}

func (a myAdapter) Request()                 {}
func (a myAdapter) Retry(k budget.Kind) bool { return k.IsRetry() && a.q.Acquire(cost(k)) }
func (a myAdapter) Success(k budget.Kind) {
	if k.IsRetry() {
		a.q.Release(cost(k))
		return
	}
	a.q.Release(1)
}

// Put your budget through the conformance suite from a test of your own,
// with go test -race. The subtests are the Check constants.
func ExampleRun() {
	_ = func(t *testing.T) { // func TestMyBudget(t *testing.T)
		budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{
			Name:  "mybudget",
			Model: model.AWS(), // the specification it claims: 500 tokens, 14/5 per retry, +1 per success
			New: func(t *testing.T, clock budget.Clock) budget.Budget {
				return myAdapter{&quota{tokens: 500}}
			},
		})
	}
}

// A budget that counts work in flight is checked against a model that
// does (model.InFlight, with Envoy's rule or failsafe-go's): the suite then
// draws whole calls, tells the budget when attempts and calls end, and
// checks the rule at every grant.
func ExampleRun_inFlight() {
	_ = func(t *testing.T) { // func TestMyInFlightBudget(t *testing.T)
		budgettest.Run(t, budgettest.Subject[model.InFlightState]{
			Name:  "my in-flight budget",
			Model: model.EnvoyDefaults(), // 20% of the calls in flight, and at least 3
			New: func(t *testing.T, _ budget.Clock) budget.Budget {
				b, err := budget.NewInFlight(budget.DefaultInFlightConfig()) // yours: Request, Retry, Success, AttemptEnd, CallEnd
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
		})
	}
}

// A keyed budget (a budget per host, per tenant) is checked one key at a
// time against the rule of one key, with its other keys coming and going:
// give Keyed its bound on the keys and a lookup of a fresh keyed budget.
// Here budget.Keyed holds at most 2 keys, so every call of the key under
// test makes it drop one; a key with calls in flight must not be the one.
func ExampleKeyed() {
	_ = func(t *testing.T) { // func TestMyKeyedBudget(t *testing.T)
		budgettest.Run(t, budgettest.Subject[model.InFlightState]{
			Name:  "per-host in-flight budgets",
			Model: model.EnvoyDefaults(), // the rule of one key
			New: budgettest.Keyed(2, func(t *testing.T, _ budget.Clock) func(key string) budget.Budget {
				hosts, err := budget.NewKeyed(budget.KeyedConfig[string, *budget.InFlight]{
					MaxKeys: 2,
					New:     func(string) (*budget.InFlight, error) { return budget.NewInFlight(budget.DefaultInFlightConfig()) },
				})
				if err != nil {
					t.Fatal(err)
				}
				return func(host string) budget.Budget {
					b, err := hosts.Get(host)
					if err != nil {
						panic(err) // Get fails only when New does
					}
					return b
				}
			}),
		})
	}
}

// Verify returns the failures instead of failing the test, for a gate
// that decides for itself; VerifyCheck runs one check.
func ExampleVerify() {
	_ = func(t *testing.T) {
		sub := budgettest.Subject[model.TokenBucketState]{
			Name: "mybudget", Model: model.AWS(),
			New: func(*testing.T, budget.Clock) budget.Budget { return myAdapter{&quota{tokens: 500}} },
		}
		if err := budgettest.VerifyCheck(t, sub, budgettest.CheckLinearizable); err != nil {
			t.Fatal(err)
		}
	}
}

// Put your retry loop through the sixteen loop checks, each in a child
// process, with a small adapter (myRetryLoop, below): run one call of your
// loop, configured from the check's Settings, with the budget and
// operation the check gives. stress.RetrierLoop is the adapter of
// budget.Retrier.
func ExampleRunLoop() {
	_ = func(t *testing.T) { // func TestMyRetryLoop(t *testing.T)
		budgettest.RunLoop(t, myRetryLoop())
	}
}

// myRetryLoop adapts a loop (here budget.Retrier) to the loop checks. An
// adapter honours what its loop can of the Settings: MaxAttempts,
// BaseDelay, MaxDelay and MaxElapsed as the loop's own options, FixedDelay
// and NoJitter as waits with no random part (the checks that need a wait
// ending at a chosen instant set them), and the checks' errors mapped onto
// the loop's classification (stress.ErrPermanent is not retryable). A
// check whose premise the loop has no way to reach (hedging, a mode with
// no attempt cap, an elapsed limit) is skipped, with the reason: without
// the Skip it fails with "premise not reached", naming the setting.
func myRetryLoop() stress.Loop {
	return stress.Loop{
		Name: "myretry",
		Call: func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
			r := &budget.Retrier{Budget: b, MaxAttempts: s.MaxAttempts, BaseDelay: s.BaseDelay, MaxDelay: s.MaxDelay, MaxElapsed: s.MaxElapsed,
				Classify: func(err error) (budget.Kind, bool) {
					if errors.Is(err, stress.ErrPermanent) {
						return budget.FirstAttempt, false
					}
					return budget.DefaultClassifier(err)
				},
			}
			switch {
			case s.FixedDelay:
				r.Jitter = func(time.Duration) time.Duration { return s.BaseDelay }
			case s.NoJitter:
				r.Jitter = func(ceiling time.Duration) time.Duration { return ceiling }
			}
			return r.Do(ctx, func(ctx context.Context, _ budget.Attempt) error { return op(ctx) })
		},
		Skip: map[string]string{
			"HedgeLosersCancelled": "myretry does not hedge",
			"UncappedLoopEnds":     "myretry always has an attempt limit",
		},
	}
}

// The example loop adapter, put through the loop checks for real.
func TestExampleLoopAdapterConforms(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	budgettest.RunLoop(t, myRetryLoop())
}

// Fuzz the budget from any starting instant, beyond the Edges check's
// seeds, with go test -fuzz FuzzMyBudget.
func ExampleFuzz() {
	_ = func(f *testing.F) { // func FuzzMyBudget(f *testing.F)
		budgettest.Fuzz(f, budgettest.Subject[model.TokenBucketState]{
			Name: "mybudget", Model: model.AWS(),
			New: func(*testing.T, budget.Clock) budget.Budget { return myAdapter{&quota{tokens: 500}} },
		})
	}
}

// The example adapter, put through the suite for real.
func TestExampleAdapterConforms(t *testing.T) {
	t.Parallel()
	budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{
		Name: "example quota", Model: model.AWS(),
		New: func(*testing.T, budget.Clock) budget.Budget { return myAdapter{&quota{tokens: 500}} },
	})
}

// The Fuzz target on a reference budget; go test runs its seeds.
func FuzzReferenceRatio(f *testing.F) {
	budgettest.Fuzz(f, budgettest.Subject[model.RatioState]{Name: "budget.Ratio", Model: window,
		New: func(_ *testing.T, c budget.Clock) budget.Budget { return newRatio(window, c) }, Scale: window.Window / 10, Horizon: 2 * window.Window})
}

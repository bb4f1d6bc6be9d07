package redisbudget_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/redisbudget"
)

// One token bucket for a whole fleet: every process that uses the name
// "payments-api" shares it, and the Retrier spends it as it would a local
// one. (The README's example.)
func ExampleNewTokenBucket() {
	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379", MaxRetries: -1})
	b, err := redisbudget.NewTokenBucket(redisbudget.Config{Client: rdb, Name: "payments-api"}, budget.DefaultTokenBucketConfig())
	if err != nil {
		panic(err)
	}
	r := &budget.Retrier{Budget: b} // the same loop, the same harness
	_ = r
}

// A networked budget through the conformance suite, as a test of your own
// would put it: a fresh key for every budget the suite builds, the suite's
// clock as Config.Clock (read in the process, and sent with each call),
// and Remote set, since the state is in the server, where no schedule of
// the test process can order the calls. TestBudgetsPassTheSuite runs this
// on both Redis budgets against a redis-server of its own.
func Example_conformanceSuite() {
	_ = func(t *testing.T) { // func TestFleetBudget(t *testing.T)
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", MaxRetries: -1})
		var keys atomic.Int64
		budgettest.Run(t, budgettest.Subject[model.RatioState]{
			Name:   "fleet ratio",
			Model:  model.SRE(), // budget.DefaultRatioConfig's rule
			Remote: true,
			New: func(t *testing.T, clock budget.Clock) budget.Budget {
				cfg := redisbudget.Config{Client: rdb, Name: fmt.Sprintf("suite-%d", keys.Add(1)), Clock: clock}
				b, err := redisbudget.NewRatio(cfg, budget.DefaultRatioConfig())
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
		})
	}
}

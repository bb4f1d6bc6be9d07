package redisbudget_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/redisbudget"
)

// Both Redis budgets pass the whole conformance suite as a team would run
// it (Example_conformanceSuite): a fresh key for every budget the suite
// builds, the suite's clock as Config.Clock, and Remote set, since the
// state is in the server. The models are the ones the budgets claim, with
// the parameters they are built with.
//
// Each budget has a server of its own: a server runs its commands on one
// thread, and the suite's runs are round trips to it, so budgets run side
// by side on one server wait on each other (one server: 164 s for the
// package on 2 cores; one each: 147 s).
func TestBudgetsPassTheSuite(t *testing.T) {
	t.Run("Ratio", func(t *testing.T) {
		t.Parallel()
		cfg := suiteConfig(t)
		budgettest.Run(t, budgettest.Subject[model.RatioState]{
			Name: "redisbudget.Ratio", Model: model.SRE(), Remote: true,
			New: func(t *testing.T, clock budget.Clock) budget.Budget {
				b, err := redisbudget.NewRatio(cfg(clock), budget.DefaultRatioConfig())
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
		})
	})
	t.Run("RatioReserve", func(t *testing.T) {
		t.Parallel()
		cfg := suiteConfig(t)
		// Floor and Reserve take turns: the floor's 3 retries below 20
		// requests, 10% of the requests plus 2 from 20 on.
		c := budget.RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Floor: 3, Reserve: 2}
		budgettest.Run(t, budgettest.Subject[model.RatioState]{
			Name:   "redisbudget.Ratio with a reserve",
			Model:  model.Ratio{PPM: 100_000, Window: 10 * time.Second, Slots: 10, Floor: 3, Reserve: 2},
			Remote: true,
			New: func(t *testing.T, clock budget.Clock) budget.Budget {
				b, err := redisbudget.NewRatio(cfg(clock), c)
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
		})
	})
	t.Run("TokenBucket", func(t *testing.T) {
		t.Parallel()
		cfg := suiteConfig(t)
		// A small bucket with a refill, so that the clock's steps matter.
		c := budget.TokenBucketConfig{Capacity: 50, TransientCost: 14, ThrottledCost: 5, SuccessBonus: 1, RefillPerSecond: 2}
		budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{
			Name:   "redisbudget.TokenBucket",
			Model:  model.TokenBucket{Capacity: 50_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 2_000},
			Remote: true,
			New: func(t *testing.T, clock budget.Clock) budget.Budget {
				b, err := redisbudget.NewTokenBucket(cfg(clock), c)
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
		})
	})
}

// suiteConfig starts a server for t's budgets and returns their Config: a
// fresh key for each budget, on the clock the suite gives.
func suiteConfig(t *testing.T) func(budget.Clock) redisbudget.Config {
	srv := startServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	var keys atomic.Int64
	return func(clock budget.Clock) redisbudget.Config {
		return redisbudget.Config{Client: rdb, Name: fmt.Sprintf("suite-%d", keys.Add(1)), Clock: clock, CallTimeout: 5 * time.Second}
	}
}

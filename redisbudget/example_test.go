package redisbudget_test

import (
	"github.com/redis/go-redis/v9"

	"github.com/retrybudget/retrybudget/budget"
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

package fleet_test

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/redis/go-redis/v9"

	"github.com/retrybudget/retrybudget/awsbudget"
	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/redisbudget"
)

// One retry quota for a fleet: every process's clients spend the same
// bucket, kept in Redis, instead of 500 tokens each.
func Example_awsFleet() {
	fleet, err := redisbudget.NewTokenBucket(redisbudget.Config{
		Client:    redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}),
		Name:      "dynamodb-retries",
		FleetSize: 40, // if Redis fails, each process falls back to 1/40 of the bucket
	}, budget.TokenBucketConfig{Capacity: 500, TransientCost: 14, ThrottledCost: 5, SuccessBonus: 1})
	if err != nil {
		panic(err)
	}
	quota := awsbudget.New(fleet)

	var cfg aws.Config // from config.LoadDefaultConfig
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = quota })
	}
	_ = cfg
}

package awsbudget_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"

	"github.com/retrybudget/retrybudget/awsbudget"
	"github.com/retrybudget/retrybudget/budget"
)

// A budget with the SDK's own numbers, as the SDK's standard retryer uses
// it: a throttling error costs 5 tokens, given back when the retry succeeds.
func ExampleNew() {
	quota, _ := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 500, TransientCost: 14, ThrottledCost: 5, SuccessBonus: 1})
	retryer := retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = awsbudget.New(quota) })

	throttled := &smithy.GenericAPIError{Code: "ThrottlingException"}
	release, err := retryer.GetRetryToken(context.Background(), throttled)
	fmt.Println(quota.Available(), err)
	_ = release(nil) // the retry succeeded
	fmt.Println(quota.Available())
	// Output:
	// 495 <nil>
	// 500
}

// A budget that counts requests (a Ratio) hears of each operation through
// CountRequests, and of its retries through the RateLimiter.
func ExampleCountRequests() {
	ratio, _ := budget.NewRatio(budget.DefaultRatioConfig())
	var cfg aws.Config
	cfg.APIOptions = append(cfg.APIOptions, awsbudget.CountRequests(ratio))
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = awsbudget.New(ratio) })
	}
	fmt.Println(len(cfg.APIOptions))
	// Output: 1
}

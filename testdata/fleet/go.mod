module github.com/retrybudget/retrybudget/testdata/fleet

go 1.26.0

replace (
	github.com/retrybudget/retrybudget => ../..
	github.com/retrybudget/retrybudget/awsbudget => ../../awsbudget
	github.com/retrybudget/retrybudget/redisbudget => ../../redisbudget
)

require (
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/aws/smithy-go v1.28.9
	github.com/redis/go-redis/v9 v9.23.0
	github.com/retrybudget/retrybudget v0.0.0
	github.com/retrybudget/retrybudget/awsbudget v0.0.0
	github.com/retrybudget/retrybudget/redisbudget v0.0.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

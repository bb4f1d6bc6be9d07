module example.com/loops

go 1.26.0

require (
	github.com/cenkalti/backoff/v5 v5.0.3
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/retrybudget/retrybudget v0.0.0
	github.com/sethvargo/go-retry v0.5.0
)

require github.com/avast/retry-go/v4 v4.7.0 // indirect

require (
	example.com/looptrack v0.0.0
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)

replace github.com/retrybudget/retrybudget => ../..

replace example.com/looptrack => ./looptrack

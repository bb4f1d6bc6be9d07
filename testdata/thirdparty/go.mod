module example.com/thirdparty

go 1.26.0

require (
	github.com/juju/ratelimit v1.0.2
	github.com/retrybudget/retrybudget v0.0.0
	github.com/throttled/throttled/v2 v2.15.0
	golang.org/x/time v0.16.0
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/hashicorp/golang-lru v0.5.4 // indirect
	github.com/kr/text v0.2.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)

replace github.com/retrybudget/retrybudget => ../..

module github.com/retrybudget/retrybudget/redisbudget

go 1.26.0

replace github.com/retrybudget/retrybudget => ../

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/retrybudget/retrybudget v0.0.0
	go.uber.org/goleak v1.3.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
)

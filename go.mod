module github.com/retrybudget/retrybudget

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	go.uber.org/goleak v1.3.0
	golang.org/x/mod v0.42.0
	golang.org/x/tools v0.52.0
	pgregory.net/rapid v1.3.0
)

require (
	golang.org/x/sync v0.24.0 // indirect
)

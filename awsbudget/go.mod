module github.com/retrybudget/retrybudget/awsbudget

go 1.26.0

replace github.com/retrybudget/retrybudget => ../

require (
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/aws/smithy-go v1.28.9
	github.com/retrybudget/retrybudget v0.0.0
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)

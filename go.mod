module github.com/retrybudget/retrybudget

go 1.26

require pgregory.net/rapid v1.3.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/aws/smithy-go v1.28.9
)

require go.uber.org/goleak v1.3.0

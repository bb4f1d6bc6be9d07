package grpcbudget_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: a stream
// not released, a connection not closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

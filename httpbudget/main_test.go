package httpbudget_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: a
// connection not closed, a server not stopped, a call still running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Package retrygo432 runs avast/retry-go/v4 at v4.3.2, the version before
// its no-cap mode was fixed upstream (pull request 84), through the loop
// checks with the adapter testdata/loops runs at the current version.
package retrygo432

import (
	"testing"

	"example.com/looptrack"
	"example.com/looptrack/retrygo"
)

// avast/retry-go/v4 v4.3.2's retry.Do through the loop checks.
func TestRetryGoLoop(t *testing.T) {
	looptrack.CheckLoop(t, retrygo.Loop(), expected, expectedSays)
}

// expected lists the checks retry.Do (v4.3.2) does not pass, and why,
// from its source (retry.go, func Do). A change means the library (or a
// check) changed: look again before updating this list.
var expected = map[string]string{
	// As at the current version: after a failure, Do selects on
	// config.timer.After(delay) and config.context.Done() and calls
	// retryableFunc again with no look at the context, so with a zero
	// delay it often attempts again after a cancel during the attempt...
	"NoAttemptAfterCancel": "fail",
	// ...and, at a wait that ends at the deadline's instant, on an
	// expired context.
	"NoAttemptOnExpiredDeadline": "fail",
	// Do never compares the delay with the context's deadline.
	"GiveUpBeforeDeadline": "fail",
	// The bug fixed upstream. With Attempts(0), Do runs
	// "for err := retryableFunc(); err != nil; err = retryableFunc()",
	// which calls neither config.retryIf nor IsRecoverable: the budget,
	// asked in RetryIf, is never asked, a permanent error is retried, and
	// only the context ends the call, with "case <-config.context.Done():
	// return nil" (a cancelled call that never succeeded returns nil).
	// v4.7.0 calls both in that loop and returns the context's error.
	"UncappedLoopEnds": "fail",
	// Skipped: no elapsed-time limit, and no hedging (see the adapter's
	// Skip).
	"MaxElapsedEndsTheLoop": "skip",
	"HedgeLosersCancelled":  "skip",
}

// expectedSays is what a pinned failure must say.
var expectedSays = map[string]string{
	"NoAttemptAfterCancel":       "after the caller cancelled during the first; want none",
	"NoAttemptOnExpiredDeadline": "attempted on an expired context in",
	"GiveUpBeforeDeadline":       "told to wait 3s with 3s left",
	"UncappedLoopEnds":           "0 asks of the budget, returned <nil>",
}

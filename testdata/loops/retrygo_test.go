package loops

import (
	"testing"

	"example.com/looptrack"
	"example.com/looptrack/retrygo"
)

// avast/retry-go/v4 v4.7.0's retry.Do through the loop checks.
func TestRetryGoLoop(t *testing.T) {
	looptrack.CheckLoop(t, retrygo.Loop(), retryGoExpected, retryGoExpectedSays)
}

// retryGoExpected lists the checks retry.Do (v4.7.0) does not pass, and
// why, from its source (retry.go, func DoWithData). A change means the
// library (or a check) changed: look again before updating this list.
// UncappedLoopEnds passes: with Attempts(0), DoWithData calls
// IsRecoverable and RetryIf after every failure and returns the context's
// error when it ends the wait, which v4.3.2 did not (retrygo432).
var retryGoExpected = map[string]string{
	// DoWithData looks at its context once, before the first attempt.
	// After a failure it selects on config.timer.After(delay) and
	// config.context.Done(), and calls retryableFunc again with no look at
	// the context: with a zero delay both are ready when the caller has
	// cancelled during the attempt, select picks either, and about half
	// the time it attempts again after the cancel.
	"NoAttemptAfterCancel": "fail",
	// The same select at a wait that ends at the deadline's instant: the
	// next attempt runs on an expired context (about 3 trials in 4).
	"NoAttemptOnExpiredDeadline": "fail",
	// DoWithData never compares the delay with the context's deadline:
	// told to wait until the deadline, it waits into it, and often
	// attempts again at its instant.
	"GiveUpBeforeDeadline": "fail",
	// Skipped: the library has no elapsed-time limit (see Skip).
	"MaxElapsedEndsTheLoop": "skip",
	// Skipped: the library does not hedge (see Skip).
	"HedgeLosersCancelled": "skip",
}

// retryGoExpectedSays is what a pinned failure must say.
var retryGoExpectedSays = map[string]string{
	"NoAttemptAfterCancel":       "after the caller cancelled during the first; want none",
	"NoAttemptOnExpiredDeadline": "attempted on an expired context in",
	"GiveUpBeforeDeadline":       "told to wait 3s with 3s left",
}

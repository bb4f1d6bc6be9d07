package budgettest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/model"
)

// The race of calls against Close: closeRacers goroutines call a budget,
// each at least closeCallsBefore times before Close starts, go on calling
// while it runs, and make closeCallsAfter calls after it returned; every
// call must return within closeWait. The race is run closeRounds times, on
// a fresh budget each: a call caught between its budget's check that it
// is open and its use of what Close tears down is a window of
// nanoseconds, which one round on a busy machine misses about one time
// in five.
const (
	closeRounds      = 20
	closeRacers      = 4
	closeCallsBefore = 20
	closeCallsAfter  = 30
	closeWait        = 10 * time.Second
)

// checkCloseRace is the second half of the Leak check, for a budget with
// Close() error: calls racing Close, and calls after it, return without
// panicking, in each of closeRounds rounds, and once they have, no goroutine the budget started is left
// (the contract's "Closing a budget" in package budget). It returns nil
// for a budget without Close.
func checkCloseRace[S any](t *testing.T, sub Subject[S]) error {
	hs := sub.harness(t)
	var (
		lineage  harness.Lineage
		closable bool
		failure  error
	)
	err := hs.Guard("calls racing Close", func() error {
		return hs.InBubble(t, "calls racing Close", func(t *testing.T) error {
			lineage = harness.Descend(func() {
				for range closeRounds {
					b, closeBudget := sub.harness(t).Open(new(budget.ManualClock))
					if _, closable = b.(interface{ Close() error }); !closable {
						return
					}
					if failure = raceClose(sub, b, closeBudget); failure != nil {
						return
					}
				}
			})
			return nil
		})
	})
	if err != nil || !closable {
		return err
	}
	if failure != nil {
		return failure
	}
	if sub.WallClock {
		return nil // the bubble has checked that no goroutine is left
	}
	if err := lineage.Gone(harness.GoneWait); err != nil {
		return fail(ruleNoLeak, "%s: after calls racing Close and calls after it: %v", sub.name(), err)
	}
	return nil
}

// raceClose runs the race on b, which closeBudget closes, and returns a
// Failure if a call panicked or never returned.
func raceClose[S any](sub Subject[S], b budget.Budget, closeBudget func()) error {
	structured := harness.IsStructured(sub.Model)
	var ready, done sync.WaitGroup
	ready.Add(closeRacers)
	closed := make(chan struct{})
	panics := make([]error, closeRacers)
	for i := range closeRacers {
		done.Go(func() {
			src := harness.Rand(rand.New(rand.NewPCG(uint64(i), 0xc105e)))
			var c harness.Caller
			call := func() {
				if structured {
					op := c.Next(src)
					c.Answer(op, harness.Perform(b, op))
					return
				}
				harness.Perform(b, model.OpRequest)
				k := []model.Kind{model.Transient, model.Throttled}[src.IntN(2, "kind")]
				if harness.Perform(b, model.OpRetry(k)) {
					harness.Perform(b, model.OpSuccess(k))
				}
			}
			signalled := false
			panics[i] = harness.Catch(fmt.Sprintf("goroutine %d of the calls racing Close", i+1), func() {
				defer func() {
					if !signalled {
						ready.Done()
					}
				}()
				for range closeCallsBefore {
					call()
				}
				signalled = true
				ready.Done()
				for {
					select {
					case <-closed:
						for range closeCallsAfter {
							call()
						}
						return
					default:
						call()
					}
				}
			})
		})
	}
	ready.Wait()
	closeErr := harness.Catch("Close, while calls raced it", closeBudget)
	close(closed)
	returned := make(chan struct{})
	go func() {
		done.Wait()
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(closeWait):
		return fail(ruleClose, "%s: calls made while Close ran, or after it, had not returned %v after Close returned", sub.name(), closeWait)
	}
	if closeErr != nil {
		return fail(ruleClose, "%s: %v", sub.name(), closeErr)
	}
	for _, p := range panics {
		if p != nil {
			return fail(ruleClose, "%s: %v", sub.name(), p)
		}
	}
	return nil
}

package stress_test

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/stress"
)

// hedgeAfter is how long hedge lets its attempts run before it starts
// another beside them.
const hedgeAfter = 5 * time.Millisecond

// hedge is a hedging retry loop, written from the loop contract: it starts
// an attempt, and another every hedgeAfter while those before it still run
// (each a retry the budget grants first, MaxAttempts in all); the first
// success wins. Once every attempt so far has failed, it backs off (or
// waits the server's delay) and retries, as a loop without hedging does.
// Before it returns, it cancels the attempts that still run and waits for
// them. It tells an in-flight budget of the end of each attempt it started
// (counted by kind, since several are in flight at once): of one whose
// outcome it reads, then; of the losers once they have returned, and of a
// granted retry that never ran, before the end of the call.
func hedge(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	start := time.Now()
	b.Request()
	ib, _ := b.(budget.InFlightBudget)
	open := map[budget.Kind]int{budget.FirstAttempt: 1} // attempts started and not ended
	ended := func(k budget.Kind) {
		if ib != nil && open[k] > 0 {
			open[k]--
			ib.AttemptEnd(k)
		}
	}
	type outcome struct {
		err  error
		kind budget.Kind
	}
	actx, cancel := context.WithCancel(ctx)
	outcomes := make(chan outcome)
	var wg sync.WaitGroup
	defer func() {
		// Cancel the losers and wait for them, reading what they send.
		cancel()
		go func() { wg.Wait(); close(outcomes) }()
		for range outcomes {
		}
		if ib != nil {
			for k := range open {
				for open[k] > 0 {
					ended(k)
				}
			}
			ib.CallEnd()
		}
	}()
	inflight, attempts := 0, 0
	// failed tells a budget that counts failures of the last one, after
	// which the loop gives up without asking for a retry.
	failed := func(err error) {
		if fc, ok := b.(budget.FailureCounter); ok {
			kind, _ := hedgeBackoff(s, attempts, err)
			fc.Failed(kind)
		}
	}
	send := func(kind budget.Kind) {
		attempts++
		inflight++
		wg.Go(func() { outcomes <- outcome{op(actx), kind} })
	}
	send(budget.FirstAttempt)
	hedging := true // false once the budget denies a hedge
	var last error
	for {
		retry := inflight == 0 // every attempt so far has failed
		var wake <-chan time.Time
		kind := budget.Transient
		switch {
		case retry:
			var wait time.Duration
			kind, wait = hedgeBackoff(s, attempts, last)
			if d, ok := ctx.Deadline(); ok && !time.Now().Add(wait).Before(d) {
				failed(last)
				return errors.Join(budget.ErrNoTime, last)
			}
			if s.MaxElapsed > 0 && time.Since(start)+wait >= s.MaxElapsed {
				failed(last)
				return errors.Join(budget.ErrNoTime, last)
			}
			if !b.Retry(kind) {
				return errors.Join(budget.ErrDenied, last)
			}
			open[kind]++
			wake = time.After(wait)
		case hedging && attempts < s.MaxAttempts:
			wake = time.After(cmp.Or(s.HedgeDelay, hedgeAfter))
		}
		select {
		case o := <-outcomes:
			inflight--
			if o.err == nil {
				b.Success(o.kind)
			}
			ended(o.kind)
			switch {
			case o.err == nil:
				return nil
			case ctx.Err() != nil:
				return errors.Join(ctx.Err(), o.err)
			case errors.Is(o.err, stress.ErrPermanent):
				return o.err
			}
			last = o.err
			if inflight == 0 && attempts >= s.MaxAttempts {
				failed(last)
				return errors.Join(budget.ErrAttempts, last)
			}
		case <-wake:
			if err := ctx.Err(); err != nil {
				return errors.Join(err, last)
			}
			switch {
			case retry:
				if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
					return errors.Join(context.DeadlineExceeded, last)
				}
				send(kind)
			case b.Retry(budget.Transient):
				open[budget.Transient]++
				send(budget.Transient)
			default:
				hedging = false
			}
		case <-ctx.Done():
			return errors.Join(ctx.Err(), last)
		}
	}
}

// hedgeBackoff returns the kind of the retry after attempt n failed with
// err, and the wait before it, as Settings ask.
func hedgeBackoff(s stress.Settings, n int, err error) (budget.Kind, time.Duration) {
	var ra *stress.RetryAfterError
	if errors.As(err, &ra) {
		return budget.Throttled, min(ra.Delay, s.MaxDelay)
	}
	ceiling := min(s.BaseDelay<<min(n-1, 30), s.MaxDelay)
	switch {
	case s.FixedDelay:
		return budget.Transient, s.BaseDelay
	case s.NoJitter:
		return budget.Transient, ceiling
	}
	return budget.Transient, time.Duration(rand.Int64N(int64(ceiling) + 1))
}

func hedgeLoop() stress.Loop {
	return stress.Loop{Name: "hedge", Call: hedge, Skip: map[string]string{"UncappedLoopEnds": "hedge always stops at MaxAttempts"}}
}

// A loop that hedges keeps every promise, every time: the checks count
// attempts made after a cancel, not attempts, and wait for its losers.
func TestHedgePassesLoopChecks(t *testing.T) {
	t.Parallel()
	for range *loopReps {
		for _, c := range stress.LoopChecks() {
			t.Run(c.Name, func(t *testing.T) {
				l := hedgeLoop()
				if why, ok := l.Skip[c.Name]; ok {
					t.Skip(why)
				}
				c.Run(t, l)
			})
		}
		if t.Failed() {
			break
		}
	}
}

func TestHedgePassesIsolatedLoopChecks(t *testing.T) {
	t.Parallel()
	budgettest.RunLoop(t, hedgeLoop())
}

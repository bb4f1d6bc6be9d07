package external

import (
	"context"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// HedgedDo is a team's hedged call: it runs op, and if op has not
// answered after delay, runs it again beside the first (asking b for the
// hedge as a Transient retry when ask is set) and returns the first
// answer, after waiting for both. It makes no retry after a failure.
func HedgedDo(ctx context.Context, b budget.Budget, delay time.Duration, ask bool, op func(context.Context) error) error {
	return hedged(ctx, b, delay, ask, true, op)
}

// HedgedDoNoCancel is HedgedDo as it was first written: it waits for the
// loser, but never cancels it, so a call lasts as long as its slowest
// attempt.
func HedgedDoNoCancel(ctx context.Context, b budget.Budget, delay time.Duration, ask bool, op func(context.Context) error) error {
	return hedged(ctx, b, delay, ask, false, op)
}

func hedged(ctx context.Context, b budget.Budget, delay time.Duration, ask, cancelLosers bool, op func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	attemptCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !cancelLosers {
		attemptCtx = ctx
	}
	b.Request()
	answers := make(chan error, 2)
	run := func(k budget.Kind) {
		err := op(attemptCtx)
		if err == nil {
			b.Success(k)
		}
		answers <- err
	}
	go run(budget.FirstAttempt)
	started := 1
	timer := time.NewTimer(delay)
	defer timer.Stop()
	var first error
	select {
	case first = <-answers:
	case <-timer.C:
		if !ask || b.Retry(budget.Transient) {
			go run(budget.Transient)
			started++
		}
		first = <-answers
	}
	cancel()
	for range started - 1 {
		<-answers // the loser
	}
	return first
}

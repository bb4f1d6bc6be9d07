package seqcheck

import (
	"fmt"
	"strings"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/model"
)

// replayTail is how many operations before the failing one an error of
// Replay lists.
const replayTail = 40

// Replay applies ops, one at a time, to a budget that sub.New builds on a
// ManualClock reading start, and to sub.Model from state init (whose clock
// must read start), and returns an error naming the first operation whose
// answer, or balance (see Check), differs. A panic in the budget is
// returned as the *harness.Fault it raised. The budget is closed at the
// end. Replay is deterministic and needs no rapid; its work is linear in
// len(ops), and it builds no description of the history unless it fails.
func Replay[S any](sub Subject[S], init S, start time.Duration, ops []model.Op) (err error) {
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(*harness.Fault)
			if !ok {
				panic(p)
			}
			err = f
		}
	}()
	clock := new(budget.ManualClock)
	clock.Set(start)
	b, closeBudget := sub.Open(clock)
	defer closeBudget()
	balance := sub.Balance(b)
	state := init
	answers := make([]bool, 0, len(ops))
	history := func(upto int) string {
		var lines []string
		from := max(0, upto-replayTail)
		if from > 0 {
			lines = append(lines, fmt.Sprintf("... %d operations before", from))
		}
		for i := from; i <= upto && i < len(answers); i++ {
			lines = append(lines, model.Describe(ops[i], answers[i]))
		}
		return strings.Join(Fold(lines), "\n  ")
	}
	for i, op := range ops {
		before := state
		var want bool
		state, want = sub.Model.Step(state, op)
		got := apply(sub, b, clock, op)
		answers = append(answers, got)
		if got != want {
			return fmt.Errorf("operation %d: %v = %v, want %v (model state before: %s)\nhistory:\n  %s",
				i+1, op, verdict(got), verdict(want), sub.Model.DescribeState(before), history(i))
		}
		if balance != nil {
			if err := balance(state); err != nil {
				return fmt.Errorf("after operation %d, %v: %v (model state: %s)\nhistory:\n  %s",
					i+1, op, err, sub.Model.DescribeState(state), history(i))
			}
		}
	}
	return nil
}

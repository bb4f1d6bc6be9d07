package seqcheck

import (
	"fmt"
	"strings"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// Replay applies ops, one at a time, to a budget that sub.New builds on a
// ManualClock reading start, and to sub.Model from state init (whose clock
// must read start), and returns an error naming the first operation whose
// answer, or balance when sub.Balance is set, differs. It recovers a panic
// in the budget as an error. Fuzz targets use it: it is deterministic, and
// needs no rapid.
func Replay[S any](sub Subject[S], init S, start time.Duration, ops []model.Op) (err error) {
	clock := new(budget.ManualClock)
	clock.Set(start)
	var history []string
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the budget panicked: %v\nhistory:\n  %s", p, strings.Join(history, "\n  "))
		}
	}()
	b := sub.New(clock)
	state := init
	av, hasBalance := b.(interface{ Available() float64 })
	for _, op := range ops {
		before := sub.Model.DescribeState(state)
		var want bool
		state, want = sub.Model.Step(state, op)
		got := sub.apply(b, clock, op)
		history = append(history, model.Describe(op, got))
		if got != want {
			return fmt.Errorf("%v = %v, want %v (model state before: %s)\nhistory:\n  %s",
				op, verdict(got), verdict(want), before, strings.Join(history, "\n  "))
		}
		if sub.Balance != nil && hasBalance {
			if g, w := av.Available(), float64(sub.Balance(state))/1000; g != w {
				return fmt.Errorf("after %v: Available() = %v, want %v (model state: %s)\nhistory:\n  %s",
					op, g, w, sub.Model.DescribeState(state), strings.Join(history, "\n  "))
			}
		}
	}
	return nil
}

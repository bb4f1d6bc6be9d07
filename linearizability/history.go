package linearizability

import (
	"fmt"
	"strings"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// An Operation is one completed call in a history.
type Operation struct {
	// Client is the goroutine that made the call: 0 for the operations run
	// before the concurrent part, 1..K for the K goroutines, and K+1 for the
	// clock goroutine.
	Client  int      `json:"client"`
	Op      model.Op `json:"op"`
	Granted bool     `json:"granted,omitempty"` // Retry's answer
	Call    int64    `json:"call"`              // stamp taken just before the call
	Return  int64    `json:"return"`            // stamp taken just after it returned
	// Pending marks a call whose outcome is unknown: it failed or timed
	// out, so it may have taken effect, at any time after its call, or
	// not at all. Its Granted and Return mean nothing. A pending call is
	// never dropped from a history: dropping it could hide a violation, or
	// invent one.
	Pending bool `json:"pending,omitempty"`
}

// String describes o as "[12,15] g2 retry(transient) -> granted".
func (o Operation) String() string {
	if o.Pending {
		return fmt.Sprintf("[%d,…] %s %s -> unknown (pending)", o.Call, clientName(o.Client), o.Op)
	}
	return fmt.Sprintf("[%d,%d] %s %s", o.Call, o.Return, clientName(o.Client), model.Describe(o.Op, o.Granted))
}

func clientName(c int) string {
	if c == 0 {
		return "pre"
	}
	return fmt.Sprintf("g%d", c)
}

// Perform calls the budget method that op names (Request, Retry or
// Success) and returns Retry's answer; it does nothing for the operations
// that are not calls of the budget (Advance, Reset) and returns false.
func Perform(b budget.Budget, op model.Op) bool {
	switch op.Op {
	case model.Request:
		b.Request()
	case model.Retry:
		return b.Retry(budget.Kind(op.Kind))
	case model.Success:
		b.Success(budget.Kind(op.Kind))
	}
	return false
}

// A History is the operations of one run, in the order they were called.
type History []Operation

// String lists the operations one per line.
func (h History) String() string {
	var b strings.Builder
	for _, o := range h {
		b.WriteString(o.String())
		b.WriteByte('\n')
	}
	return b.String()
}

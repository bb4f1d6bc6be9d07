package model

import (
	"fmt"
	"strings"
)

// An Operation is one completed call in a history: an operation a goroutine
// made on a budget (or its clock), its answer, and when it was called and
// returned.
type Operation struct {
	// Client is the goroutine that made the call: 0 for the operations run
	// before the concurrent part, 1..K for the K goroutines, and K+1 for the
	// clock goroutine.
	Client  int   `json:"client"`
	Op      Op    `json:"op"`
	Granted bool  `json:"granted,omitempty"` // Retry's answer
	Call    int64 `json:"call"`              // stamp taken just before the call
	Return  int64 `json:"return"`            // stamp taken just after it returned
	// Pending marks a call whose outcome is unknown: it failed or timed
	// out, so it may have taken effect, at any time after its call, or
	// not at all. Its Granted and Return mean nothing. A pending call is
	// never dropped from a history: dropping it could hide a violation, or
	// invent one.
	Pending bool `json:"pending,omitempty"`
	// Settled, if positive, bounds a pending call: if it took effect at
	// all, it did so before this stamp. A recorder sets it when it knows
	// that nothing can apply the call later, for example after killing
	// the server that received it. Zero means no bound.
	Settled int64 `json:"settled,omitempty"`
	// ReadFrom and ReadTo, when not 0, are stamps a recorder took around
	// the first and the last clock reading the call made on its own
	// goroutine: the call read the clock between them. A checker may use
	// them to try the likely orders first (a budget that decides under a
	// lock decides between its readings), never to reject an order that
	// Call and Return allow.
	ReadFrom int64 `json:"read_from,omitempty"`
	ReadTo   int64 `json:"read_to,omitempty"`
}

// String describes o as "[12,15] g2 retry(transient) -> granted".
func (o Operation) String() string {
	if o.Pending {
		if o.Settled > 0 {
			return fmt.Sprintf("[%d,%d?] %s %s -> unknown (pending, settled by %d)", o.Call, o.Settled, clientName(o.Client), o.Op, o.Settled)
		}
		return fmt.Sprintf("[%d,…] %s %s -> unknown (pending)", o.Call, clientName(o.Client), o.Op)
	}
	return fmt.Sprintf("[%d,%d] %s %s", o.Call, o.Return, clientName(o.Client), Describe(o.Op, o.Granted))
}

// clientName names a client of a history: "pre" for client 0, which runs
// before the concurrent part, and "g1", "g2", … for the others.
func clientName(c int) string {
	if c == 0 {
		return "pre"
	}
	return fmt.Sprintf("g%d", c)
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

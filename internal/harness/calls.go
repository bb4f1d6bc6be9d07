package harness

import (
	"fmt"

	"github.com/retrybudget/retrybudget/model"
)

// IsStructured reports whether m is told of ends (model.Structured): its
// operations are then drawn inside calls, as a retry loop makes them.
func IsStructured[S any](m model.Model[S]) bool {
	s, ok := m.(model.Structured)
	return ok && s.Structured()
}

// A Caller draws the operations of one caller's calls, one call at a time,
// keeping the structure of model.Structured: a call begins with Request;
// each attempt that starts (the first, a granted retry) may succeed, and
// then ends; after a failed attempt the caller asks for a retry or gives
// up; a success, a denied retry or giving up ends the call. Next draws an
// operation and Answer must be told the answer of each Retry it drew
// before the next draw. The zero Caller is between calls.
type Caller struct {
	state     callerState
	kind      model.Kind // the kind of the attempt in flight
	succeeded bool
}

type callerState uint8

const (
	idle      callerState = iota // between calls
	attempt                      // an attempt of kind is in flight
	failed                       // the last attempt ended without success
	asked                        // a Retry was drawn; Answer says what came of it
	finishing                    // the call must end: it succeeded, or a retry was denied
)

// InCall reports whether c is in a call.
func (c *Caller) InCall() bool { return c.state != idle }

// StartFailed begins a call whose first attempt fails at once, and returns
// its two operations: Request and AttemptEnd(FirstAttempt). c must be
// between calls.
func (c *Caller) StartFailed() [2]model.Op {
	c.state, c.kind, c.succeeded = failed, model.FirstAttempt, false
	return [2]model.Op{model.OpRequest, model.OpAttemptEnd(model.FirstAttempt)}
}

// Failed reports whether c's last attempt ended without success, so that
// its next operation is a Retry or its CallEnd.
func (c *Caller) Failed() bool { return c.state == failed }

// Next draws c's next operation.
func (c *Caller) Next(src Source) model.Op {
	switch c.state {
	case idle:
		c.state, c.kind, c.succeeded = attempt, model.FirstAttempt, false
		return model.OpRequest
	case attempt:
		if !c.succeeded && src.IntN(10, "outcome") < 3 {
			c.succeeded = true
			return model.OpSuccess(c.kind)
		}
		c.state = failed
		if c.succeeded {
			c.state = finishing
		}
		return model.OpAttemptEnd(c.kind)
	case failed:
		if src.IntN(10, "giveUp") < 2 {
			c.state = idle
			return model.OpCallEnd
		}
		c.state, c.kind = asked, RetryKind(src)
		if src.IntN(40, "badKind") == 0 {
			c.kind = model.Kind(7) // a kind no caller should pass: denied
		}
		return model.OpRetry(c.kind)
	case asked:
		panic("harness: Caller.Next before the Answer of its Retry")
	}
	c.state = idle
	return model.OpCallEnd
}

// Answer tells c the answer of the operation it drew last; only a Retry's
// matters.
func (c *Caller) Answer(op model.Op, granted bool) {
	if c.state != asked || op.Op != model.Retry {
		return
	}
	if granted {
		c.state, c.succeeded = attempt, false
		return
	}
	c.state = finishing
}

// CallOps draws calls until they hold at least n operations, as one
// caller makes them one after another with every Retry granted; a list
// ends with its last call complete. A recorder of a structured scenario
// skips, after a denied Retry, the call's operations up to its CallEnd.
func CallOps(src Source, n int) []model.Op {
	var c Caller
	var ops []model.Op
	for len(ops) < n || c.InCall() {
		op := c.Next(src)
		c.Answer(op, true)
		ops = append(ops, op)
	}
	return ops
}

// Continues reports whether ops begins in the middle of a call started
// before it, whose last attempt failed: with its Retry, or with its
// CallEnd (the caller gives up).
func Continues(ops []model.Op) bool {
	return len(ops) > 0 && (ops[0].Op == model.Retry || ops[0].Op == model.CallEnd)
}

// OpenCalls draws the operations that leave up to calls calls and up to
// retries retries in flight, each count drawn in [0, max], mixed in a
// random order: the Before of a structured scenario.
func OpenCalls(src Source, calls, retries int) []model.Op {
	nc, nr := src.IntN(calls+1, "openCalls"), src.IntN(retries+1, "openRetries")
	ops := make([]model.Op, 0, nc+nr)
	for nc+nr > 0 {
		if src.IntN(nc+nr, "openOrder") < nc {
			ops, nc = append(ops, model.OpRequest), nc-1
		} else {
			ops, nr = append(ops, model.OpRetry(RetryKind(src))), nr-1
		}
	}
	return ops
}

// Skipper applies the rule a recorder of structured calls follows: after
// a Retry is denied, the rest of the call (a success and an end of a retry
// that never started, further retries) is skipped, up to its CallEnd.
type Skipper struct{ skipping bool }

// Skip reports whether op is to be skipped; call Saw with the answer of
// each operation that is not.
func (s *Skipper) Skip(op model.Op) bool { return s.skipping && op.Op != model.CallEnd }

// Saw records the answer of a performed operation.
func (s *Skipper) Saw(op model.Op, granted bool) {
	switch op.Op {
	case model.Retry:
		s.skipping = !granted
	case model.CallEnd:
		s.skipping = false
	}
}

// WellFormed returns nil if ops, one caller's list, keeps the call
// structure as the recorder replays it: every Success and AttemptEnd is
// inside an attempt of its kind that has started, every Retry follows an
// attempt that ended without success, and every CallEnd ends a call. A
// list may stop in the middle of a call, and it may begin in the middle of
// one that was started before it (by a scenario's Before), where that
// call asks for a retry: Continues reports such a list. Minimizing a
// structured scenario keeps only well-formed lists, so that a
// counterexample never holds an end of something that never started.
func WellFormed(ops []model.Op) error {
	var c Caller
	if Continues(ops) {
		c.state = failed
	}
	for i, op := range ops {
		ok := false
		switch c.state {
		case idle:
			ok = op.Op == model.Request
		case attempt:
			ok = (op.Op == model.Success && op.Kind == c.kind && !c.succeeded) ||
				(op.Op == model.AttemptEnd && op.Kind == c.kind)
		case failed:
			ok = op.Op == model.Retry || op.Op == model.CallEnd
		case finishing:
			ok = op.Op == model.CallEnd
		}
		if !ok {
			return fmt.Errorf("operation %d, %v, breaks the call structure", i+1, op)
		}
		switch op.Op {
		case model.Request:
			c.state, c.kind, c.succeeded = attempt, model.FirstAttempt, false
		case model.Success:
			c.succeeded = true
		case model.AttemptEnd:
			c.state = failed
			if c.succeeded {
				c.state = finishing
			}
		case model.Retry:
			c.state, c.kind, c.succeeded = attempt, op.Kind, false
		case model.CallEnd:
			c.state = idle
		}
	}
	return nil
}

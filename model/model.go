package model

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// Kind classifies an attempt as in the budget contract: FirstAttempt, or a
// retry after a Transient or a Throttled failure. It is budget.Kind: a
// model and the budget it specifies speak of attempts in one type.
type Kind = budget.Kind

// The attempt kinds, budget's.
const (
	FirstAttempt = budget.FirstAttempt
	Transient    = budget.Transient
	Throttled    = budget.Throttled
)

// OpKind names an operation.
type OpKind uint8

// The operations. The zero OpKind is not an operation.
const (
	Request OpKind = iota + 1 // a first attempt starts
	Retry                     // may a retry of Op.Kind follow? Output: granted
	Success                   // an attempt of Op.Kind succeeded
	Advance                   // the clock moves by Op.D
	// Reset loses the budget's state, as a store that restarts without
	// persistence does: the budget is as new, on the same clock. Only a
	// model that is a [Resetter] is ever given it.
	Reset
	// AttemptEnd: an attempt of Op.Kind ended, whatever its outcome. Each
	// start has one end: the first attempt's (a Request's) is
	// AttemptEnd(FirstAttempt), a granted retry's is AttemptEnd of the
	// retry's kind, even when the retry never ran (the call was cancelled
	// during its backoff). Only an in-flight budget
	// (budget.InFlightBudget) is told of it; see [InFlight].
	AttemptEnd
	// CallEnd: a call ended; it makes no more attempts. It follows the end
	// of the call's last attempt.
	CallEnd
)

// An Op is one operation on a budget or its clock.
type Op struct {
	Op   OpKind
	Kind Kind          // for Retry and Success
	D    time.Duration // for Advance
}

// Constructors for the operations, for tables and tests.
var (
	OpRequest = Op{Op: Request}
)

// OpRetry returns Retry(k).
func OpRetry(k Kind) Op { return Op{Op: Retry, Kind: k} }

// OpSuccess returns Success(k).
func OpSuccess(k Kind) Op { return Op{Op: Success, Kind: k} }

// OpReset is Reset.
var OpReset = Op{Op: Reset}

// OpAttemptEnd returns AttemptEnd(k).
func OpAttemptEnd(k Kind) Op { return Op{Op: AttemptEnd, Kind: k} }

// OpCallEnd is CallEnd.
var OpCallEnd = Op{Op: CallEnd}

// OpAdvance returns Advance(d).
func OpAdvance(d time.Duration) Op { return Op{Op: Advance, D: d} }

// String describes op as in a history: "request", "retry(transient)",
// "success(first)", "advance(1.5s)", "end(transient)", "callend".
func (op Op) String() string {
	switch op.Op {
	case Request:
		return "request"
	case Retry:
		return "retry(" + op.Kind.String() + ")"
	case Success:
		return "success(" + op.Kind.String() + ")"
	case Advance:
		return "advance(" + op.D.String() + ")"
	case Reset:
		return "reset"
	case AttemptEnd:
		return "end(" + op.Kind.String() + ")"
	case CallEnd:
		return "callend"
	}
	return fmt.Sprintf("Op(%d)", op.Op)
}

// Describe describes op with its output: "retry(transient) -> granted".
// Only Retry has an output; other operations are described by String.
func Describe(op Op, granted bool) string {
	if op.Op != Retry {
		return op.String()
	}
	if granted {
		return op.String() + " -> granted"
	}
	return op.String() + " -> denied"
}

// A Model is the sequential specification of one budget, with its
// parameters. S is its state; states are values, and Step never changes
// the state it is given.
type Model[S any] interface {
	// Init returns the state of a newly built budget whose clock reads 0.
	Init() S
	// Step applies op to s and returns the next state and, for Retry,
	// whether the retry is granted. It returns false for other operations.
	Step(s S, op Op) (S, bool)
	// Equal reports whether two states behave the same from now on: every
	// sequence of operations gives the same answers from both (and the
	// same balance, for a Balanced model). Plain == on the state is enough when
	// each behaviour has one representation: when Step normalizes (a full
	// bucket carries no fraction, an expired slot is dropped, a clock
	// that does not matter is not kept). A state that holds a slice or a
	// map, or an unnormalized field, needs a comparison of what matters.
	// The linearizability check uses Equal to recognise a state it has
	// already searched from: an Equal stricter than behaviour only slows
	// the search, but a looser one can make it pass a history that is not
	// linearizable.
	Equal(a, b S) bool
	// Hash returns a hash of s; states that are Equal hash equal. [Hash]
	// is a helper for it.
	Hash(s S) uint64
	// DescribeState describes s for a human: "tokens=486 now=1.2s".
	DescribeState(s S) string
}

// Clock is the time part of every model's state.
type Clock struct {
	Now  time.Duration // the clock's reading
	Seen time.Duration // the latest reading the budget has observed
}

// Advance applies Advance(d) to the clock: it moves the reading and
// nothing else. Like the budget package's ManualClock, the reading wraps
// around on overflow. A model's Step calls it for an Advance operation.
func (c Clock) Advance(d time.Duration) Clock {
	c.Now = time.Duration(int64(uint64(c.Now) + uint64(d)))
	return c
}

// Observe is the forward-only rule for an operation that reads the clock:
// it acts at the later of the reading and the latest reading seen, which
// becomes the new Seen. A reading that has gone back behind Seen (a clock
// stepped backwards) therefore counts as Seen, so no interval is refilled
// or expired twice. Time that matters to the model is measured from the
// old Seen to the new one.
func (c Clock) Observe() Clock {
	if c.Now > c.Seen {
		c.Seen = c.Now
	}
	return c
}

// String formats c as "now=1.2s", adding "seen=…" when the clock has gone
// back behind the latest reading seen.
func (c Clock) String() string {
	if c.Seen > c.Now {
		return "now=" + c.Now.String() + " seen=" + c.Seen.String()
	}
	return "now=" + c.Now.String()
}

// Hash mixes words with FNV-1a over their little-endian bytes: a helper for
// a model's Hash method, which passes the fields Equal compares.
func Hash(words ...int64) uint64 {
	h := uint64(14695981039346656037)
	for _, w := range words {
		for i := 0; i < 8; i++ {
			h ^= uint64(byte(w >> (8 * i)))
			h *= 1099511628211
		}
	}
	return h
}

// formatMilli formats milli-units as a decimal number.
func formatMilli(m int64) string {
	return strconv.FormatFloat(float64(m)/1000, 'f', -1, 64)
}

// MarshalText encodes op as its String form, so that histories saved as JSON
// read as "retry(transient)" rather than numbers.
func (op Op) MarshalText() ([]byte, error) {
	if op.Op < Request || op.Op > CallEnd {
		return nil, fmt.Errorf("model: cannot encode %v", op)
	}
	return []byte(op.String()), nil
}

// UnmarshalText decodes the String form of an operation.
func (op *Op) UnmarshalText(text []byte) error {
	s := string(text)
	name, arg, hasArg := strings.Cut(s, "(")
	if hasArg {
		if !strings.HasSuffix(arg, ")") {
			return fmt.Errorf("model: bad operation %q", s)
		}
		arg = strings.TrimSuffix(arg, ")")
	}
	switch {
	case name == "request" && !hasArg:
		*op = OpRequest
		return nil
	case name == "reset" && !hasArg:
		*op = OpReset
		return nil
	case name == "callend" && !hasArg:
		*op = OpCallEnd
		return nil
	case (name == "retry" || name == "success" || name == "end") && hasArg:
		k, err := parseKind(arg)
		if err != nil {
			return fmt.Errorf("model: bad operation %q: %w", s, err)
		}
		switch name {
		case "retry":
			*op = OpRetry(k)
		case "success":
			*op = OpSuccess(k)
		default:
			*op = OpAttemptEnd(k)
		}
		return nil
	case name == "advance" && hasArg:
		d, err := time.ParseDuration(arg)
		if err != nil {
			return fmt.Errorf("model: bad operation %q: %w", s, err)
		}
		*op = OpAdvance(d)
		return nil
	}
	return fmt.Errorf("model: bad operation %q", s)
}

func parseKind(s string) (Kind, error) {
	for k := FirstAttempt; k <= Throttled; k++ {
		if s == k.String() {
			return k, nil
		}
	}
	if n, ok := strings.CutPrefix(s, "Kind("); ok {
		v, err := strconv.ParseUint(strings.TrimSuffix(n, ")"), 10, 8)
		if err == nil && strings.HasSuffix(n, ")") {
			return Kind(v), nil
		}
	}
	return 0, fmt.Errorf("unknown kind %q", s)
}

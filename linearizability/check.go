package linearizability

import (
	"bytes"
	"cmp"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/model"
)

// A Verdict is the outcome of a check.
type Verdict int

// The verdicts. Inconclusive is never a pass: the search ran out of time
// before it found an order or proved there is none.
const (
	Linearizable Verdict = iota + 1
	Violation
	Inconclusive
)

// String returns "linearizable", "violation" or "inconclusive".
func (v Verdict) String() string {
	switch v {
	case Linearizable:
		return "linearizable"
	case Violation:
		return "violation"
	case Inconclusive:
		return "inconclusive"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// MarshalText encodes v as its String form.
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText decodes the String form of a verdict.
func (v *Verdict) UnmarshalText(b []byte) error {
	for _, c := range []Verdict{Linearizable, Violation, Inconclusive} {
		if string(b) == c.String() {
			*v = c
			return nil
		}
	}
	return fmt.Errorf("linearizability: unknown verdict %q", b)
}

// A Result is what Check found.
type Result[S any] struct {
	Verdict Verdict
	History model.History
	Elapsed time.Duration // time the search took

	// Set for a Violation:
	Prefix []model.Operation // the longest order of operations the model accepts
	State  S                 // the model's state after Prefix
	Stuck  []Stuck           // operations that could come next, and why each cannot

	m    model.Model[S]
	pm   porcupine.Model
	info porcupine.LinearizationInfo
}

// Stuck is an operation that real time allows next after the longest
// accepted order, with what the model would have answered.
type Stuck struct {
	model.Operation
	ModelGranted bool // the model's answer, for a Retry
}

// call is the input of an operation in the porcupine models.
type call struct {
	Op      model.Op
	Pending bool
}

func describe(input, output any) string {
	c := input.(call)
	if c.Pending {
		return c.Op.String() + " -> unknown"
	}
	return model.Describe(c.Op, output.(bool))
}

// porcupineModel returns the porcupine model that Check uses for m on a
// history with no pending calls.
func porcupineModel[S any](m model.Model[S]) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return m.Init() },
		Step: func(state, input, output any) (bool, any) {
			op := input.(call).Op
			next, granted := m.Step(state.(S), op)
			if op.Op == model.Retry && granted != output.(bool) {
				return false, state
			}
			return true, next
		},
		Equal:             func(a, b any) bool { return m.Equal(a.(S), b.(S)) },
		Hash:              func(s any) uint64 { return m.Hash(s.(S)) },
		DescribeOperation: describe,
		DescribeState:     func(s any) string { return m.DescribeState(s.(S)) },
	}
}

// porcupineWithPending returns the model Check uses for m on a history with
// pending calls: a pending call either took effect, with whatever answer
// the model gives, or never did, so it leads to both states.
func porcupineWithPending[S any](m model.Model[S]) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{m.Init()} },
		Step: func(state, input, output any) []any {
			c := input.(call)
			next, granted := m.Step(state.(S), c.Op)
			if c.Pending {
				return []any{state, next}
			}
			if c.Op.Op == model.Retry && granted != output.(bool) {
				return nil
			}
			return []any{next}
		},
		Equal:             func(a, b any) bool { return m.Equal(a.(S), b.(S)) },
		Hash:              func(s any) uint64 { return m.Hash(s.(S)) },
		DescribeOperation: describe,
		DescribeState:     func(s any) string { return m.DescribeState(s.(S)) },
	}
	return nm.ToModel()
}

func toPorcupine(h model.History) []porcupine.Operation {
	ops := make([]porcupine.Operation, len(h))
	for i, o := range h {
		ret := o.Return
		if o.Pending {
			ret = math.MaxInt64 // it may take effect at any time after its call
			if o.Settled > o.Call {
				ret = o.Settled // or before a stamp the recorder knows
			}
		}
		ops[i] = porcupine.Operation{ClientId: o.Client, Input: call{o.Op, o.Pending}, Output: o.Granted, Call: o.Call, Return: ret}
	}
	return ops
}

// narrowTimeout bounds the search of a narrowed history (see narrowReads): one
// that finds no order in this time is searched again whole.
const narrowTimeout = time.Second

// narrowMin is the shortest history narrowReads narrows: a shorter one is
// searched whole at once, in little time.
const narrowMin = 64

// narrowReads returns ops, the operations of h, with the interval of each call
// that read the clock on its own goroutine cut to the stamps around its
// readings (Operation.ReadFrom and ReadTo), and whether any was cut.
//
// An order the narrowed history allows, the whole one allows too: a call
// that returned before another was called still did, on intervals inside
// the true ones. So finding an order there proves h linearizable, and
// finding none proves nothing. The point is speed: a timed budget's call
// that counts a request in a slot has, over its whole interval, a clock
// step or two it may come before or after; the model accepts both and
// finds out which was wrong only at a grant many calls later, so the
// search backtracks over every combination of such choices, 2^n of them.
// A budget that decides where it reads the clock (under its lock) leaves
// its calls' readings in the order of its decisions, and the narrowed
// search has nothing left to guess.
func narrowReads(h model.History, ops []porcupine.Operation) ([]porcupine.Operation, bool) {
	if len(h) < narrowMin {
		return nil, false
	}
	var out []porcupine.Operation
	for i, o := range h {
		if o.Pending || o.ReadFrom <= 0 || o.ReadFrom < o.Call || o.ReadTo <= o.ReadFrom || o.ReadTo > o.Return {
			continue
		}
		if out == nil {
			out = slices.Clone(ops)
		}
		out[i].Call, out[i].Return = o.ReadFrom, o.ReadTo
	}
	return out, out != nil
}

// Check searches for an order of h that m accepts, for at most timeout
// (0 means no limit), and says what it found.
func Check[S any](m model.Model[S], h model.History, timeout time.Duration) Result[S] {
	start := time.Now()
	if rest, state, ok := sequentialPrefix(m, h); ok {
		// Every order of h begins with the prefix, in its order, and the
		// model accepted it: h is linearizable if the rest is, from the
		// state the prefix leaves. Only a pass is taken from the shorter
		// search; anything else is searched again whole, so that a
		// violation is found, and told, as it always was.
		if check(from[S]{m, state}, rest, timeout).Verdict == Linearizable {
			return Result[S]{Verdict: Linearizable, History: h, Elapsed: time.Since(start), m: m, pm: porcupineModel(m)}
		}
	}
	r := check(m, h, timeout)
	r.Elapsed = time.Since(start)
	return r
}

// seqPrefixMin is the shortest sequential prefix worth checking apart: a
// shorter one costs porcupine little.
const seqPrefixMin = 16

// sequentialPrefix returns the operations of h after its sequential
// prefix, the operations each of which returned before any other of the
// rest was called (a scenario's Before, say), and the state m reaches
// through them, when that prefix is at least seqPrefixMin long and m
// gives every retry in it the answer the budget gave.
func sequentialPrefix[S any](m model.Model[S], h model.History) (model.History, S, bool) {
	state := m.Init()
	if len(h) < 2*seqPrefixMin {
		return nil, state, false
	}
	order := make([]int, len(h))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(h[a].Call, h[b].Call) })
	n := 0
	for ; n < len(order)-1; n++ {
		o := h[order[n]]
		if o.Pending || o.Return >= h[order[n+1]].Call {
			break
		}
	}
	if n < seqPrefixMin {
		return nil, state, false
	}
	for _, i := range order[:n] {
		next, granted := m.Step(state, h[i].Op)
		if h[i].Op.Op == model.Retry && granted != h[i].Granted {
			return nil, state, false
		}
		state = next
	}
	rest := make(model.History, 0, len(h)-n)
	for _, i := range order[n:] {
		rest = append(rest, h[i])
	}
	return rest, state, true
}

// from is m started in state init.
type from[S any] struct {
	model.Model[S]
	init S
}

func (f from[S]) Init() S { return f.init }

// check is Check without the sequential prefix's shortcut.
func check[S any](m model.Model[S], h model.History, timeout time.Duration) Result[S] {
	r := Result[S]{History: h, m: m, pm: porcupineModel(m)}
	if slices.ContainsFunc(h, func(o model.Operation) bool { return o.Pending }) {
		r.pm = porcupineWithPending(m)
	}
	ops := toPorcupine(h)
	start := time.Now()
	if narrowed, ok := narrowReads(h, ops); ok {
		within := narrowTimeout
		if timeout > 0 {
			within = min(within, timeout)
		}
		var res porcupine.CheckResult
		harness.Busy(func() { res = porcupine.CheckOperationsTimeout(r.pm, narrowed, within) })
		if res == porcupine.Ok {
			r.Verdict = Linearizable
			r.Elapsed = time.Since(start)
			return r
		}
	}
	var res porcupine.CheckResult
	harness.Busy(func() { res = porcupine.CheckOperationsTimeout(r.pm, ops, timeout) })
	r.Elapsed = time.Since(start)
	switch res {
	case porcupine.Ok:
		r.Verdict = Linearizable
		return r
	case porcupine.Unknown:
		r.Verdict = Inconclusive
		return r
	}
	r.Verdict = Violation
	// Search again, keeping what a human needs to see. It finds the same
	// violation; if it runs out of time, the explanation is partial.
	harness.Busy(func() { _, r.info = porcupine.CheckOperationsVerbose(r.pm, ops, max(timeout, 10*time.Second)) })
	r.explain()
	return r
}

// explain fills Prefix, State and Stuck from the longest partial
// linearization.
func (r *Result[S]) explain() {
	// The longest partial linearization; among equals, the first in
	// lexicographic order, so that the explanation does not depend on
	// porcupine's map order.
	var longest []int
	for _, partition := range r.info.PartialLinearizations() {
		for _, p := range partition {
			if len(p) > len(longest) || (len(p) == len(longest) && slices.Compare(p, longest) < 0) {
				longest = p
			}
		}
	}
	state := r.m.Init()
	placed := make([]bool, len(r.History))
	for _, id := range longest {
		o := r.History[id]
		r.Prefix = append(r.Prefix, o)
		state, _ = r.m.Step(state, o.Op)
		placed[id] = true
	}
	r.State = state
	// Real time allows next any unplaced operation that was called before
	// every unplaced operation returned.
	firstReturn := int64(1<<63 - 1)
	for i, o := range r.History {
		switch {
		case placed[i]:
		case !o.Pending:
			firstReturn = min(firstReturn, o.Return)
		case o.Settled > o.Call:
			firstReturn = min(firstReturn, o.Settled)
		}
	}
	for i, o := range r.History {
		if !placed[i] && o.Call <= firstReturn {
			_, granted := r.m.Step(state, o.Op)
			r.Stuck = append(r.Stuck, Stuck{Operation: o, ModelGranted: granted})
		}
	}
}

// Explain describes the result for a human. For a violation it shows the
// end of the longest order the model accepts, the model's state there, and
// the operations that cannot come next.
func (r Result[S]) Explain() string {
	var b strings.Builder
	switch r.Verdict {
	case 0:
		return "no result: nothing was checked\n"
	case Linearizable:
		fmt.Fprintf(&b, "linearizable: %d operations (checked in %v)\n", len(r.History), r.Elapsed.Round(time.Microsecond))
		return b.String()
	case Inconclusive:
		fmt.Fprintf(&b, "inconclusive: the search of %d operations ran out of time after %v; this is not a pass\n",
			len(r.History), r.Elapsed.Round(time.Millisecond))
		return b.String()
	}
	fmt.Fprintf(&b, "not linearizable: no order of the %d operations explains every answer the budget gave\n", len(r.History))
	fmt.Fprintf(&b, "the longest order the model accepts has %d operations", len(r.Prefix))
	const tail = 8
	if len(r.Prefix) > tail {
		fmt.Fprintf(&b, "; its last %d:\n", tail)
	} else {
		b.WriteString(":\n")
	}
	state := r.m.Init()
	for i, o := range r.Prefix {
		state, _ = r.m.Step(state, o.Op)
		if i >= len(r.Prefix)-tail {
			fmt.Fprintf(&b, "  %-50s => %s\n", o.String(), r.m.DescribeState(state))
		}
	}
	fmt.Fprintf(&b, "there the model is in state %s, and no operation can come next:\n", r.m.DescribeState(r.State))
	for _, s := range r.Stuck {
		fmt.Fprintf(&b, "  %-50s", s.Operation.String())
		if s.Op.Op == model.Retry && s.Granted != s.ModelGranted {
			fmt.Fprintf(&b, " but the model answers %s", answer(s.ModelGranted))
		} else {
			b.WriteString(" the model accepts it, but no order after it works")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// writeHTML writes porcupine's interactive rendering of the history and its
// partial linearizations to path, under a heading of title (the budget, the
// model and the broken rule, say). It works for a Violation only.
func (r Result[S]) writeHTML(path, title string) error {
	if r.Verdict != Violation {
		return fmt.Errorf("linearizability: nothing to render for a %v history", r.Verdict)
	}
	var buf bytes.Buffer
	if err := porcupine.Visualize(r.pm, r.info, &buf); err != nil {
		return err
	}
	page := buf.String()
	if title != "" {
		t := html.EscapeString(title)
		page = strings.Replace(page, "<title>Porcupine</title>", "<title>"+t+"</title>", 1)
		head := "<pre style=\"font: 14px monospace; white-space: pre-wrap\">" + t + "</pre>"
		page = strings.Replace(page, "<body>", "<body>\n    "+head, 1)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(page), 0o644)
}

func answer(granted bool) string {
	if granted {
		return "granted"
	}
	return "denied"
}

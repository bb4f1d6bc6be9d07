package linearizability

import (
	"slices"
	"time"

	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/model"
)

// minimizeReport says what minimize did. Witness is what fails returned for
// the last failing run of To.
type minimizeReport[W any] struct {
	From, To Scenario
	Witness  W
	Runs     int           // scenario runs made, failing or not
	Elapsed  time.Duration // time spent
}

// minimize shrinks a failing scenario. fails runs a scenario once and
// reports whether it failed, with a witness of the failure (a Result, say);
// a candidate counts as failing if any of up to tries runs fails. minimize
// stops dropping after limit (zero means no limit) and returns the smallest
// scenario found by then.
//
// minimize drops whole goroutines, then the clock, then chunks of each
// operation list (halves, quarters, down to single operations), keeping
// every drop after which the scenario still fails, until a full pass drops
// nothing. It returns the smallest scenario it found and the witness of its
// last failure; if no run of s fails at all, To is s and Witness is zero.
//
// A concurrent failure reproduces only some of the time. A drop is kept only
// when the smaller scenario really failed, so To always has a failure behind
// it. A drop can be refused wrongly when the smaller scenario fails too
// rarely to show within tries runs: start from a scenario of [focus],
// which is small already, and give more tries.
//
// Before any of that it tries the candidates given (s with its quiet
// operations dropped, say: see [withoutQuiet]), in order, keeping each that
// still fails.
func minimize[W any](s Scenario, tries int, limit time.Duration, fails func(Scenario) (W, bool), candidates ...Scenario) minimizeReport[W] {
	start := time.Now()
	rep := minimizeReport[W]{From: s}
	first := true
	try := func(c Scenario) bool {
		if !first && limit > 0 && time.Since(start) > limit {
			return false
		}
		if !first && c.validate() != nil {
			return false // a structured list broken by a drop
		}
		first = false
		for range max(tries, 1) {
			rep.Runs++
			if w, failed := fails(c); failed {
				rep.Witness = w
				return true
			}
		}
		return false
	}
	cur := clone(s)
	if !try(cur) {
		rep.To = cur
		rep.Elapsed = time.Since(start)
		return rep
	}
	for _, c := range candidates {
		if c.len() < cur.len() && try(c) {
			cur = clone(c)
		}
	}
	for changed := true; changed; {
		changed = false
		for i := len(cur.Goroutines) - 1; i >= 0 && len(cur.Goroutines) > 1; i-- {
			c := clone(cur)
			c.Goroutines = slices.Delete(c.Goroutines, i, i+1)
			if try(c) {
				cur, changed = c, true
			}
		}
		if len(cur.Clock) > 0 {
			c := clone(cur)
			c.Clock = nil
			if try(c) {
				cur, changed = c, true
			}
		}
		// Chunks of each list. A list is addressed through a function, so
		// that one loop serves the prefix, the goroutines and the clock.
		lists := []func(*Scenario) *[]model.Op{func(s *Scenario) *[]model.Op { return &s.Before }}
		for g := range cur.Goroutines {
			lists = append(lists, func(s *Scenario) *[]model.Op {
				if g < len(s.Goroutines) {
					return &s.Goroutines[g]
				}
				return new([]model.Op)
			})
		}
		for _, list := range lists {
			if cur.Structured && shrinkCalls(&cur, list, try) {
				changed = true
			}
			if shrinkList(&cur, list, try) {
				changed = true
			}
		}
		if shrinkClock(&cur, try) {
			changed = true
		}
		cur.Goroutines = slices.DeleteFunc(cur.Goroutines, func(g []model.Op) bool { return len(g) == 0 })
	}
	rep.To = cur
	rep.Elapsed = time.Since(start)
	return rep
}

// shrinkCalls drops, from one list of a structured scenario, whole calls
// (Request to CallEnd) and then whole retries (Retry with its Success and
// AttemptEnd), the units a chunk of operations seldom matches, while it
// still fails.
func shrinkCalls(cur *Scenario, list func(*Scenario) *[]model.Op, try func(Scenario) bool) bool {
	changed := false
	drop := func(starts func(model.Op) bool, ends func(model.Op) bool) {
		for at := len(*list(cur)) - 1; at >= 0; at-- {
			l := *list(cur)
			if at >= len(l) || !starts(l[at]) {
				continue
			}
			end := at + 1
			for end < len(l) && !ends(l[end]) && !starts(l[end]) && l[end].Op != model.Request {
				end++
			}
			if end < len(l) && ends(l[end]) {
				end++
			}
			c := clone(*cur)
			*list(&c) = slices.Delete(*list(&c), at, end)
			if try(c) {
				*cur, changed = c, true
			}
		}
	}
	isOp := func(k model.OpKind) func(model.Op) bool { return func(op model.Op) bool { return op.Op == k } }
	drop(isOp(model.Request), isOp(model.CallEnd))
	drop(isOp(model.Retry), isOp(model.AttemptEnd))
	return changed
}

// shrinkList drops chunks of one operation list of cur while it still
// fails, from chunks of half the list down to single operations.
func shrinkList(cur *Scenario, list func(*Scenario) *[]model.Op, try func(Scenario) bool) bool {
	changed := false
	for chunk := max(len(*list(cur))/2, 1); chunk >= 1; chunk /= 2 {
		for at := len(*list(cur)) - chunk; at >= 0; at -= chunk {
			c := clone(*cur)
			l := list(&c)
			if at+chunk > len(*l) {
				continue
			}
			*l = slices.Delete(*l, at, at+chunk)
			if try(c) {
				*cur, changed = c, true
			}
		}
		if chunk == 1 {
			break
		}
	}
	return changed
}

// shrinkClock drops single clock steps while the scenario still fails.
func shrinkClock(cur *Scenario, try func(Scenario) bool) bool {
	changed := false
	for i := len(cur.Clock) - 1; i >= 0; i-- {
		c := clone(*cur)
		c.Clock = slices.Delete(c.Clock, i, i+1)
		if try(c) {
			*cur, changed = c, true
		}
	}
	return changed
}

func clone(s Scenario) Scenario {
	c := Scenario{Before: slices.Clone(s.Before), Clock: slices.Clone(s.Clock), WallClock: s.WallClock, Structured: s.Structured}
	c.Goroutines = make([][]model.Op, len(s.Goroutines))
	for i, g := range s.Goroutines {
		c.Goroutines[i] = slices.Clone(g)
	}
	return c
}

// focus builds, from a violation r found by running s, small scenarios
// that are likely to fail the same way, the most promising first. Each
// keeps the operations that overlap in time with the calls the model cannot
// accept next (the stuck ones whose answer it disputes), each on its own
// client's goroutine, after a short sequence of operations (Before) that
// brings the model to the state the longest accepted order was in just
// before them. The first also moves into Before every such operation that
// is not the last of its goroutine, which leaves one call per goroutine to
// overlap: the likeliest to meet again. Before is found from the model
// alone, by a bounded breadth-first search and otherwise by dropping
// operations of the accepted order while the state it reaches stays the
// same, so focus is deterministic. It returns nothing when r is not a
// violation or its history has pending calls.
func focus[S any](r Result[S], s Scenario) []Scenario {
	if r.Verdict != Violation || len(r.Stuck) == 0 {
		return nil
	}
	for _, o := range r.History {
		if o.Pending {
			return nil
		}
	}
	var culprits []model.Operation
	for _, st := range r.Stuck {
		if st.Op.Op == model.Retry && st.Granted != st.ModelGranted {
			culprits = append(culprits, st.Operation)
		}
	}
	if len(culprits) == 0 {
		for _, st := range r.Stuck {
			culprits = append(culprits, st.Operation)
		}
	}
	first, last := culprits[0].Call, culprits[0].Return
	for _, c := range culprits {
		first, last = min(first, c.Call), max(last, c.Return)
	}
	// The accepted order up to the first operation still running when the
	// culprits were called happened before them: it becomes Before.
	cut := len(r.Prefix)
	for i, o := range r.Prefix {
		if o.Return >= first {
			cut = i
			break
		}
	}
	var involved []model.Operation // in the accepted order, then the culprits
	for _, o := range r.Prefix[cut:] {
		if o.Call <= last {
			involved = append(involved, o)
		}
	}
	involved = append(involved, culprits...)
	// lastOf is the call stamp of each goroutine's last involved call.
	lastOf := map[int]int64{}
	for _, o := range involved {
		if o.Op.Op != model.Advance && o.Client != 0 {
			lastOf[o.Client] = max(lastOf[o.Client], o.Call)
		}
	}
	build := func(moveEarlier bool) Scenario {
		state := r.m.Init()
		var before []model.Op
		step := func(o model.Operation) {
			state, _ = r.m.Step(state, o.Op)
			before = append(before, o.Op)
		}
		for _, o := range r.Prefix[:cut] {
			step(o)
		}
		var rest []model.Operation
		for i, o := range involved {
			inPrefix := i < len(involved)-len(culprits)
			if moveEarlier && inPrefix && o.Op.Op != model.Advance && o.Client != 0 && o.Call < lastOf[o.Client] {
				step(o)
				continue
			}
			rest = append(rest, o)
		}
		slices.SortFunc(rest, func(a, b model.Operation) int { return int(a.Call - b.Call) })
		out := Scenario{Before: shortPath(r.m, before, state), WallClock: s.WallClock}
		goroutine := map[int]int{}
		for _, o := range rest {
			switch {
			case o.Op.Op == model.Advance:
				out.Clock = append(out.Clock, o.Op.D)
			case o.Client == 0:
				out.Before = append(out.Before, o.Op)
			default:
				g, ok := goroutine[o.Client]
				if !ok {
					g = len(out.Goroutines)
					goroutine[o.Client] = g
					out.Goroutines = append(out.Goroutines, nil)
				}
				out.Goroutines[g] = append(out.Goroutines[g], o.Op)
			}
		}
		return out
	}
	if s.Structured {
		return focusStructured(r, s, build(false))
	}
	one, all := build(true), build(false)
	if one.len() == all.len() && len(one.Before) == len(all.Before) {
		return []Scenario{all}
	}
	return []Scenario{one, all}
}

// focusStructured turns all, a focused scenario built as for any model,
// into a structured one, or returns nothing when it cannot: its Before
// becomes a shortest path of Requests and Retries to the same state, and
// each goroutine's operations are cut to a well-formed list: from its
// first Request or Retry (a Retry continues a call of Before), up to the
// first operation that breaks the structure.
func focusStructured[S any](r Result[S], s Scenario, all Scenario) []Scenario {
	target := r.m.Init()
	for _, op := range all.Before {
		target, _ = r.m.Step(target, op)
	}
	before, ok := openPath(r.m, target)
	if !ok {
		return nil
	}
	out := Scenario{Before: before, Clock: all.Clock, WallClock: s.WallClock, Structured: true}
	for _, g := range all.Goroutines {
		start := slices.IndexFunc(g, func(op model.Op) bool { return op.Op == model.Request || op.Op == model.Retry })
		if start < 0 {
			continue
		}
		g = g[start:]
		for n := len(g); n > 0; n-- {
			if harness.WellFormed(g[:n]) == nil {
				out.Goroutines = append(out.Goroutines, slices.Clone(g[:n]))
				break
			}
		}
	}
	if len(out.Goroutines) == 0 || out.validate() != nil {
		return nil
	}
	return []Scenario{out}
}

// openPath returns a shortest sequence of Requests and Retries, of at most
// 12 operations, that takes m from its initial state to target, if a
// bounded breadth-first search finds one.
func openPath[S any](m model.Model[S], target S) ([]model.Op, bool) {
	return search(m, []model.Op{model.OpRequest, model.OpRetry(model.Transient), model.OpRetry(model.Throttled)}, target, 12)
}

// search returns a shortest sequence of at most depth operations drawn
// from alphabet that takes m from its initial state to target, if a
// breadth-first search of at most 50,000 expansions finds one.
func search[S any](m model.Model[S], alphabet []model.Op, target S, depth int) ([]model.Op, bool) {
	type node struct {
		s    S
		path []model.Op
	}
	seen := map[uint64][]S{}
	visit := func(s S) bool {
		h := m.Hash(s)
		for _, o := range seen[h] {
			if m.Equal(o, s) {
				return false
			}
		}
		seen[h] = append(seen[h], s)
		return true
	}
	frontier := []node{{s: m.Init()}}
	visit(m.Init())
	for d, expanded := 0, 0; d <= depth && len(frontier) > 0; d++ {
		var next []node
		for _, n := range frontier {
			if m.Equal(n.s, target) {
				return n.path, true
			}
			if d == depth {
				continue
			}
			for _, op := range alphabet {
				if expanded++; expanded > 50_000 {
					return nil, false
				}
				s, _ := m.Step(n.s, op)
				if visit(s) {
					next = append(next, node{s, append(slices.Clone(n.path), op)})
				}
			}
		}
		frontier = next
	}
	return nil, false
}

// shortPath returns a short sequence of operations that takes m from its
// initial state to target, given ops, which does: the shortest of at most
// six operations drawn from those in ops, if a bounded search finds one,
// and otherwise ops with every chunk dropped whose removal keeps the end
// state equal to target.
func shortPath[S any](m model.Model[S], ops []model.Op, target S) []model.Op {
	if len(ops) <= 2 {
		return ops
	}
	var alphabet []model.Op
	for _, op := range ops {
		if !slices.Contains(alphabet, op) && len(alphabet) < 16 {
			alphabet = append(alphabet, op)
		}
	}
	if path, ok := search(m, alphabet, target, 6); ok {
		return path
	}
	reaches := func(ops []model.Op) bool {
		s := m.Init()
		for _, op := range ops {
			s, _ = m.Step(s, op)
		}
		return m.Equal(s, target)
	}
	cur := slices.Clone(ops)
	for chunk := max(len(cur)/2, 1); ; chunk /= 2 {
		for at := len(cur) - chunk; at >= 0; at -= chunk {
			if at+chunk > len(cur) {
				continue
			}
			c := slices.Delete(slices.Clone(cur), at, at+chunk)
			if reaches(c) {
				cur = c
			}
		}
		if chunk == 1 {
			return cur
		}
	}
}

// withoutQuiet returns s without the operations of its prefix (Before, run
// in order before the goroutines start) after which the model's state is
// Equal to what it was: a denied retry of a bucket, a request a model does
// not count, a step of the clock that changes nothing. The prefix then
// leaves the model where it did, and a minimized history keeps the
// operations that matter. It returns false when there is none to drop.
func withoutQuiet[S any](m model.Model[S], s Scenario) (Scenario, bool) {
	st := m.Init()
	keep := make([]model.Op, 0, len(s.Before))
	for _, op := range s.Before {
		next, _ := m.Step(st, op)
		if m.Equal(st, next) {
			continue
		}
		keep = append(keep, op)
		st = next
	}
	if len(keep) == len(s.Before) {
		return s, false
	}
	c := clone(s)
	c.Before = keep
	return c, true
}

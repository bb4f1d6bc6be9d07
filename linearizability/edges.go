package linearizability

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/sched"
	"github.com/retrybudget/retrybudget/model"
)

// The exhaustive stage of the Linearizable check. Random schedules (PCT, a
// walk) give no bound: a pass says nothing of the schedules not tried. So
// under control, before them, small scenarios that meet at the budget's
// edges are run under every schedule with at most two preemptions (a
// preemption: a switch away from a goroutine that could have gone on).
// Then the scenarios among them that took at most deepenFrom schedules
// run again under every schedule with at most three preemptions inside
// calls, a switch at a goroutine standing between two of its calls being
// free: a call that loses two optimistic attempts and is overtaken once
// more in its fallback needs that, and the scenario threeUpdates is made
// for it. A pass of the stage then means: no violation in any schedule
// with at most two preemptions of each scenario reported complete, nor
// in any with at most three inside calls of each small scenario reported
// complete at three. A scenario cut short is named, never taken for a
// pass of its bound.

// exhaustLimit bounds the schedules of one scenario of the exhaustive
// stage, and exhaustTotal those of the stage: counts, not time, so that a
// loaded machine runs the same schedules as an idle one and gives the same
// verdict. exhaustWithin only guards against a budget whose calls are slow
// (a sleep in them): it is far beyond what the schedules take. A scenario
// cut short by any of them is reported as such, never taken for a pass of
// its bound.
// exhaustLimits describes the exhaustive stage's limits, in the words the
// log, the package docs and the README use.
const exhaustLimits = "5,000 a scenario, 40,000 a stage, 2 min guard"

const (
	exhaustLimit  = 5_000
	exhaustTotal  = 40_000
	exhaustWithin = 2 * time.Minute
)

// The exhaustive stage runs again, at three preemptions inside calls, the
// scenarios that were complete at two within deepenFrom schedules (the
// small ones): the scenarios made for a third preemption first, then the
// cheapest at two. Each runs up to deepenLimit schedules, deepenTotal in
// all, under the same guard of time. deepenLimits says so in the words the
// log, the package docs and the README use.
const (
	deepenFrom   = 300
	deepenLimit  = 5_000
	deepenTotal  = 20_000
	deepenLimits = "5,000 a scenario, 20,000 in all"
)

// edgeScan bounds the calls a search for a budget's edge makes.
const edgeScan = 2000

// maxProbe bounds the asks a scenario makes to reach the first denial.
const maxProbe = 12

// exhaustScenarios returns the scenarios of the exhaustive stage: two or
// three goroutines of up to four operations each, after a prefix, made one
// call at a time, that brings the budget to an edge the model shows: one
// retry left before the first denial, or none; for an in-flight budget,
// the calls in flight at which one call more would grant one retry more,
// with every retry those calls allow in flight. Each scenario is named
// for the edge it explores.
func (se *searcher[S]) exhaustScenarios() []namedScenario {
	m := se.tg.Model
	t, th, f := model.Transient, model.Throttled, model.FirstAttempt
	retry, success := model.OpRetry, model.OpSuccess
	var out []namedScenario
	if harness.IsStructured(m) {
		if calls, left, ok := lastSlot(m); ok {
			// The fewest calls at which two retries may be in flight,
			// with all but one of them taken: two retries race for the
			// last, a check-then-act's smallest witness.
			before := repeat(model.OpRequest, calls)
			before = append(before, repeat(retry(t), left)...)
			out = append(out, namedScenario{fmt.Sprintf("%d calls and %d retries in flight, one retry left: two retries race for it", calls, left),
				Scenario{Before: before, Goroutines: [][]model.Op{{retry(t)}, {retry(th)}}, Structured: true}})
		}
		calls, retries, ok := inFlightEdge(m)
		if !ok {
			return out
		}
		before := make([]model.Op, 0, calls+retries)
		for range calls {
			before = append(before, model.OpRequest)
		}
		for range retries {
			before = append(before, retry(t))
		}
		// The scenarios of two or three operations first: the larger ones
		// below can reach the stage's limits.
		if retries > 0 {
			// One slot left at the edge: a retry read against a call
			// that starts and a retry that takes the room the call made,
			// both completed by another goroutine in between (a limit
			// computed before a compare-and-swap loop goes stale only
			// after both).
			one := append(repeat(model.OpRequest, calls), repeat(retry(t), retries-1)...)
			out = append(out, namedScenario{fmt.Sprintf("%d calls and %d retries in flight, one retry left, where one call more allows one retry more: a retry against a call that starts and retries", calls, retries-1),
				Scenario{Before: one, Goroutines: [][]model.Op{{retry(t)}, {model.OpRequest, model.OpAttemptEnd(f), retry(th)}}, Structured: true}})
		}
		if retries > 0 && inFlightAllowed(m, calls+1) > retries {
			// One call more, and two retries left: a retry takes one and
			// its attempt ends while another retry asks. Before the
			// first retry, while it is in flight and after its end, the
			// model grants the second; counts stored one after the
			// other, and read as a pair between the two stores (a
			// seqlock whose version moves only after them), deny it.
			up := append(repeat(model.OpRequest, calls+1), repeat(retry(t), retries-1)...)
			out = append(out, namedScenario{fmt.Sprintf("%d calls and %d retries in flight, two retries left: a retry's attempt ends as another retry asks", calls+1, retries-1),
				Scenario{Before: up, Goroutines: [][]model.Op{{retry(t), model.OpAttemptEnd(t), model.OpCallEnd}, {retry(th)}}, Structured: true}})
		}
		// A continues an open call with a retry. B ends another open call
		// and starts one: the calls in flight never pass the edge, though
		// a count taken across the two can. C retries too (denied at the
		// edge, so its call ends).
		a := []model.Op{retry(t), model.OpAttemptEnd(t), model.OpCallEnd}
		b := []model.Op{model.OpCallEnd, model.OpRequest, model.OpAttemptEnd(f), model.OpCallEnd}
		c := []model.Op{retry(th), model.OpAttemptEnd(th), model.OpCallEnd, model.OpRequest}
		d := []model.Op{model.OpRequest, model.OpAttemptEnd(f), model.OpCallEnd}
		name := fmt.Sprintf("%d calls and %d retries in flight, where one call more allows one retry more", calls, retries)
		// Cheapest first: the three-goroutine ones can reach the limits.
		out = append(out,
			// A call starts while another ends, then the new call's retry
			// asks at the edge: a count of calls that the two update at
			// once, one of them outside the lock, keeps one update only,
			// and the retry is answered from the count it kept.
			namedScenario{name + ": a call starts as one ends, then retries", Scenario{Before: before, Goroutines: [][]model.Op{{model.OpRequest, model.OpAttemptEnd(f), retry(t)}, {model.OpCallEnd}}, Structured: true}},
			namedScenario{name + ": a retry against a call ending and one starting", Scenario{Before: before, Goroutines: [][]model.Op{a, b}, Structured: true}},
			namedScenario{name + ": two retries against a call ending and one starting", Scenario{Before: before, Goroutines: [][]model.Op{a, c}, Structured: true}},
			// The call first: the first goroutine runs on from the
			// prefix, so a call that opens a slot before two retries
			// race for it costs no preemption. The retries' attempts
			// left open: two retries granted where the call opened one
			// slot stay in flight together without a preemption to hold
			// the first's end back.
			namedScenario{name + ": a call, and two retries left in flight", Scenario{Before: before, Goroutines: [][]model.Op{d, {retry(t)}, {retry(th)}}, Structured: true}},
			// The same, each retry's call run to its end.
			namedScenario{name + ": a call, and two retries", Scenario{Before: before, Goroutines: [][]model.Op{d, a, a}, Structured: true}},
		)
		return out
	}
	warmups := []struct {
		name string
		ops  []model.Op
	}{
		{"new", nil},
		{"after 20 requests", repeat(model.OpRequest, 20)},
		{"after 20 successes", repeat(success(f), 20)},
	}
	seen := map[string]bool{}
	for _, w := range warmups {
		grants, ok := grantsLeft(m, w.ops)
		if !ok || grants == 0 {
			continue
		}
		last := append(append([]model.Op(nil), w.ops...), repeat(retry(t), grants-1)...)
		empty := append(append([]model.Op(nil), last...), retry(t))
		key := fmt.Sprint(grants, len(w.ops) > 0 && w.ops[0].Op == model.Request)
		if seen[key] {
			continue // the same edge as an earlier warmup's
		}
		seen[key] = true
		at := func(what string) string { return fmt.Sprintf("%s, %s", w.name, what) }
		// A lost withdrawal or a lost credit shows in an answer only at
		// the edge: the asks go on, one at a time, to the first denial.
		probe := repeat(retry(t), min(grants+1, maxProbe))
		if len(w.ops) == 0 {
			// A budget's first calls: state made on first use.
			out = append(out, namedScenario{"new, the first calls, then asks to the first denial", Scenario{
				Goroutines: [][]model.Op{{retry(t)}, probe}}})
		}
		if len(w.ops) == 0 {
			// Four goroutines take tokens and give them back, as a pool
			// of reused nodes sees them: one takes one and holds it, one
			// takes one and returns two, one returns one, while the
			// first asks on. A lock-free pool whose compare-and-swap
			// compares a reused node's index only (an ABA) is fooled when
			// one ask reads the top, and a node it read is taken, freed
			// and pushed back before its swap: it takes more goroutines
			// than preemptions, as a goroutine that has returned gives
			// way at no cost.
			k, n := churnKind(m)
			asks := repeat(retry(k), min(max(n, 1), maxProbe))
			// Three goroutines suffice where a returned token's node goes
			// back over another only if one more return comes between:
			// one takes a token and returns it, and stops inside its
			// return while the third returns one. One token taken
			// before, so that both returns count.
			out = append(out, namedScenario{"one token taken, three goroutines take and return tokens, then asks", Scenario{
				Before: []model.Op{retry(k)}, Goroutines: [][]model.Op{asks, {retry(k), success(k)}, {success(k)}}}})
			out = append(out, namedScenario{"new, four goroutines take and return tokens, then asks", Scenario{
				Goroutines: [][]model.Op{asks, {retry(k)}, {retry(k), success(k), success(k)}, {success(k)}}}})
		}
		if gs, ok := threeUpdatesEdge(m, w.ops); ok && len(w.ops) == 0 {
			// One call that three updates of another goroutine overtake,
			// one in each of three windows (see deepenFrom): a call that
			// falls back to a slow path after losing two optimistic
			// attempts, and is overtaken a third time there, overwrites
			// the third update. The updates end one grant from the
			// first denial, so a charge or a credit lost shows in the
			// answers of the two asks after them.
			out = append(out, namedScenario{threeUpdates, gs})
		}
		out = append(out,
			namedScenario{at("as much as it holds: a credit races asks that go on to the first denial"), Scenario{Before: w.ops,
				Goroutines: [][]model.Op{{success(f)}, probe}}})
		if below, credit, n, ok := creditEdge(m, w.ops, grants); ok {
			// Below capacity, where the credit counts: it adds a grant,
			// so a credit lost to a concurrent ask (a compare-and-swap
			// tried once, a load-add-store) shows at the first denial.
			out = append(out, namedScenario{at(fmt.Sprintf("below capacity, where a %v adds a grant: it races a credit and asks that go on to the first denial", credit)),
				Scenario{Before: below, Goroutines: [][]model.Op{{credit}, append([]model.Op{success(f)}, repeat(retry(t), n)...)}}})
		}
		if before, n, ok := requestEdge(m, w.ops); ok {
			// Where the second of two requests raises the allowance:
			// they race, then asks go to the first denial (a limit
			// cached from the requests and stored after the unlock,
			// stale, takes the new room away).
			out = append(out, namedScenario{at("one request from a higher allowance: two requests race, then asks go to the first denial"),
				Scenario{Before: before, Goroutines: [][]model.Op{{model.OpRequest}, append([]model.Op{model.OpRequest}, repeat(retry(t), n)...)}}})
		}
		if before, ok := raiseEdge(m, w.ops); ok {
			// One retry left, where one request more allows one retry
			// more: a retry asks while another goroutine makes the
			// request and takes the room it made (a limit computed
			// before a compare-and-swap loop goes stale only after both).
			out = append(out, namedScenario{at("one retry left, one request from a higher allowance: a retry against a request and the retry it allows"),
				Scenario{Before: before, Goroutines: [][]model.Op{{retry(t)}, {model.OpRequest, retry(th)}}}})
		}
		if last, ok := lastOfAll(m, w.ops); ok {
			// The retry that leaves nothing for any kind: it races a
			// refund and a retry that the refund pays for (an "empty"
			// flag stored after the unlock, stale, denies it).
			out = append(out, namedScenario{at("the retry that leaves none of any kind races a refund and a retry"),
				Scenario{Before: last, Goroutines: [][]model.Op{{retry(t)}, {success(t), retry(t)}}}})
		}
		if below, n, ok := fullEdge(m, w.ops); ok {
			// One credit from full: a credit that fills the budget races
			// a retry, then a credit and asks to the first denial (a
			// "full" flag stored after the unlock, stale, drops the
			// second credit; a cache of the count likewise).
			out = append(out, namedScenario{at("one credit from full: a credit that fills it races a retry, a credit and asks to the first denial"),
				Scenario{Before: below, Goroutines: [][]model.Op{{success(f)}, append([]model.Op{retry(t), success(f)}, repeat(retry(t), n)...)}}})
		}
		out = append(out,
			namedScenario{at("the last retry: two goroutines each ask twice"), Scenario{Before: last,
				Goroutines: [][]model.Op{{retry(t), retry(t)}, {retry(th), success(t)}}}},
			namedScenario{at("the last retry: one asks while the other completes four calls"), Scenario{Before: last,
				Goroutines: [][]model.Op{{retry(t)}, {success(f), retry(t), success(t), retry(th)}}}},
			namedScenario{at("the last retry: three goroutines"), Scenario{Before: last,
				Goroutines: [][]model.Op{{retry(th)}, {retry(t)}, {success(f), model.OpRequest}}}},
			namedScenario{at("no retry left: refunds and credits race the asks"), Scenario{Before: empty,
				Goroutines: [][]model.Op{{success(f), retry(t)}, {retry(t), success(t)}}}},
		)
		if credit, ok := payingCredit(m, empty); ok {
			// None left: a retry asks while another goroutine makes a
			// credit that pays for one and asks for it (a charge taken
			// first and undone when it overdraws holds the balance below
			// what it is, for as long as it is not undone).
			out = append(out, namedScenario{at(fmt.Sprintf("no retry left: a retry against a %v and the retry it pays for", credit)), Scenario{Before: empty,
				Goroutines: [][]model.Op{{retry(t)}, {credit, retry(t)}}}})
		}
		if se.tg.Scale > 0 && !se.tg.WallClock {
			horizon := se.tg.Horizon
			if horizon <= 0 {
				horizon = 100 * se.tg.Scale
			}
			due := append(append([]model.Op(nil), empty...), model.OpAdvance(horizon/2+se.tg.Scale/2))
			out = append(out,
				namedScenario{at("the last retry while the clock moves"), Scenario{Before: last,
					Goroutines: [][]model.Op{{retry(t), retry(t)}, {model.OpRequest, retry(th)}}, Clock: []time.Duration{se.tg.Scale}}},
				namedScenario{at("no retry left and time gone by: a credit races the asks"), Scenario{Before: due,
					Goroutines: [][]model.Op{{success(f), success(t)}, {retry(t), retry(th)}}}},
				// A whole window gone by: the first call to see it
				// slides the window, and a retry reads beside it (a
				// snapshot of the window published under a version
				// counter, read half written, still holds the old
				// retries).
				namedScenario{at("no retry left and a whole horizon gone by: a request races a retry"), Scenario{
					Before:     append(append([]model.Op(nil), empty...), model.OpAdvance(horizon+se.tg.Scale)),
					Goroutines: [][]model.Op{{model.OpRequest}, {retry(t)}}}},
			)
		}
	}
	return out
}

type namedScenario struct {
	name string
	s    Scenario
}

// threeUpdates names the scenario made for a third preemption: it is
// deepened first (see deepenFrom).
const threeUpdates = "new, a retry overtaken by three updates, then two asks"

func (ns namedScenario) deep() bool { return ns.name == threeUpdates }

func repeat(op model.Op, n int) []model.Op {
	ops := make([]model.Op, n)
	for i := range ops {
		ops[i] = op
	}
	return ops
}

// threeUpdatesEdge returns the scenario threeUpdates: a retry of kind a
// on one goroutine; on the other, retries of kinds b and a (all three
// granted), a success of kind b, then two retries of kind b, after as many
// retries of kind a before as leave the first of those two granted and
// the second denied. The kinds are the first pair, transient before
// throttled, for which there are such retries; ok is false if there are
// none.
func threeUpdatesEdge[S any](m model.Model[S], warmup []model.Op) (Scenario, bool) {
	t, th := model.Transient, model.Throttled
	for _, k := range [][2]model.Kind{{t, th}, {th, t}, {th, th}, {t, t}} {
		a, b := model.OpRetry(k[0]), model.OpRetry(k[1])
		for j := range edgeScan {
			before := append(slices.Clip(warmup), repeat(a, j)...)
			s := m.Init()
			for _, op := range before {
				s, _ = m.Step(s, op)
			}
			all := true
			for _, op := range []model.Op{a, b, a} {
				var granted bool
				s, granted = m.Step(s, op)
				all = all && granted
			}
			if !all {
				break // fewer grants than the updates need
			}
			s, _ = m.Step(s, model.OpSuccess(k[1]))
			s, first := m.Step(s, b)
			if _, second := m.Step(s, b); first && !second {
				return Scenario{Before: before, Goroutines: [][]model.Op{{a}, {b, a, model.OpSuccess(k[1]), b, b}}}, true
			}
		}
	}
	return Scenario{}, false
}

// churnKind returns the retry kind the model grants most often in a row
// when new, transient on a tie, and how many.
func churnKind[S any](m model.Model[S]) (model.Kind, int) {
	count := func(k model.Kind) int {
		s := m.Init()
		for n := range maxProbe {
			var granted bool
			if s, granted = m.Step(s, model.OpRetry(k)); !granted {
				return n
			}
		}
		return maxProbe
	}
	t, th := count(model.Transient), count(model.Throttled)
	if th > t {
		return model.Throttled, th
	}
	return model.Transient, t
}

// grantsLeft returns how many Retry(Transient) calls in a row the model
// grants after ops, up to edgeScan; ok is false when it grants them all.
func grantsLeft[S any](m model.Model[S], ops []model.Op) (int, bool) {
	s := m.Init()
	for _, op := range ops {
		s, _ = m.Step(s, op)
	}
	for n := range edgeScan {
		var granted bool
		s, granted = m.Step(s, model.OpRetry(model.Transient))
		if !granted {
			return n, true
		}
	}
	return 0, false
}

// creditEdge finds, after warmup and then as few asks as can be, a point
// below capacity where, after a success of a first attempt, a success's
// credit (of any kind) lets the model grant one retry more: the state, the
// credit, and the asks that go to the first denial with both counted. ok
// is false if there is none, or it is further than maxProbe asks from that
// denial.
func creditEdge[S any](m model.Model[S], warmup []model.Op, grants int) (before []model.Op, credit model.Op, asks int, ok bool) {
	bonus := model.OpSuccess(model.FirstAttempt)
	for j := grants; j >= 1; j-- {
		p := append(append([]model.Op(nil), warmup...), repeat(model.OpRetry(model.Transient), j)...)
		g, gok := grantsLeft(m, append(slices.Clip(p), bonus))
		if !gok {
			continue
		}
		for _, k := range []model.Kind{model.FirstAttempt, model.Throttled, model.Transient} {
			c := model.OpSuccess(k)
			if with, wok := grantsLeft(m, append(slices.Clip(p), bonus, c)); wok && with > g && with+1 <= maxProbe {
				return p, c, with + 1, true
			}
		}
	}
	return nil, model.Op{}, 0, false
}

// requestEdge finds, after warmup and as few requests as can be, a point
// where one request leaves the model's grants as they are and a second
// adds one; it returns that prefix and the asks that go to the first
// denial after both requests. ok is false if there is none within
// edgeScan requests, or the asks are more than maxProbe.
func requestEdge[S any](m model.Model[S], warmup []model.Op) ([]model.Op, int, bool) {
	p := append([]model.Op(nil), warmup...)
	prev, ok := grantsLeft(m, append(slices.Clip(p), model.OpRequest))
	if !ok {
		return nil, 0, false
	}
	for range edgeScan {
		two, ok := grantsLeft(m, append(slices.Clip(p), model.OpRequest, model.OpRequest))
		if !ok {
			return nil, 0, false
		}
		if two > prev {
			if two+1 > maxProbe {
				return nil, 0, false
			}
			return p, two + 1, true
		}
		p = append(p, model.OpRequest)
		prev = two
	}
	return nil, 0, false
}

// raiseEdge finds, after warmup and as few requests as can be, a point
// where one request more lets the model grant one retry more, and returns
// it with the retries that leave one granted; ok is false if there is
// none within edgeScan requests.
func raiseEdge[S any](m model.Model[S], warmup []model.Op) ([]model.Op, bool) {
	p := append([]model.Op(nil), warmup...)
	g, ok := grantsLeft(m, p)
	if !ok {
		return nil, false
	}
	for range edgeScan {
		p = append(p, model.OpRequest)
		next, ok := grantsLeft(m, p)
		if !ok {
			return nil, false
		}
		if next > g && g >= 1 {
			before := append(p[:len(p)-1:len(p)-1], repeat(model.OpRetry(model.Transient), g-1)...)
			if one, _ := grantsLeft(m, before); one != 1 {
				return nil, false
			}
			if two, _ := grantsLeft(m, append(slices.Clip(before), model.OpRequest)); two != 2 {
				return nil, false
			}
			return before, true
		}
		g = next
	}
	return nil, false
}

// payingCredit returns the first success, of a transient retry, a
// throttled one or a first attempt, that lets the model grant a retry
// after empty; ok is false if none does.
func payingCredit[S any](m model.Model[S], empty []model.Op) (model.Op, bool) {
	for _, k := range []model.Kind{model.Transient, model.Throttled, model.FirstAttempt} {
		c := model.OpSuccess(k)
		if g, ok := grantsLeft(m, append(slices.Clip(empty), c)); ok && g >= 1 {
			return c, true
		}
	}
	return model.Op{}, false
}

// lastOfAll finds, after warmup and transient then throttled retries, a
// point where a transient retry is granted and leaves no retry of either
// kind granted; ok is false if there is none within edgeScan retries.
func lastOfAll[S any](m model.Model[S], warmup []model.Op) ([]model.Op, bool) {
	rt, rth := model.OpRetry(model.Transient), model.OpRetry(model.Throttled)
	p := append([]model.Op(nil), warmup...)
	s := m.Init()
	for _, op := range p {
		s, _ = m.Step(s, op)
	}
	for range edgeScan {
		after, granted := m.Step(s, rt)
		if !granted {
			// Too little for a transient retry: none of this kind is
			// the last of all.
			return nil, false
		}
		_, t := m.Step(after, rt)
		_, th := m.Step(after, rth)
		if !t && !th {
			return p, true
		}
		// Spend a throttled retry when the transient one would still
		// leave one of its own.
		next := rt
		if _, again := m.Step(after, rt); !again {
			next = rth
		}
		s, _ = m.Step(s, next)
		p = append(p, next)
	}
	return nil, false
}

// fullEdge finds, after warmup, a transient retry and then as few
// successes of first attempts as can be, the point one credit from full:
// one more success changes the state, and a second one after it does not.
// It returns that prefix and the asks that go to the first denial after
// the race of fullEdge's scenario, with every credit counted; ok is false
// if there is no such point within edgeScan successes or the asks are more
// than maxProbe.
func fullEdge[S any](m model.Model[S], warmup []model.Op) (before []model.Op, asks int, ok bool) {
	succ := model.OpSuccess(model.FirstAttempt)
	p := append(append([]model.Op(nil), warmup...), model.OpRetry(model.Transient))
	s := m.Init()
	for _, op := range p {
		s, _ = m.Step(s, op)
	}
	for range edgeScan {
		once, _ := m.Step(s, succ)
		if m.Equal(once, s) {
			return nil, 0, false // full already: no credit below it
		}
		if twice, _ := m.Step(once, succ); m.Equal(twice, once) {
			g, gok := grantsLeft(m, append(slices.Clip(p), succ, model.OpRetry(model.Transient), succ))
			if !gok || g+1 > maxProbe {
				return nil, 0, false
			}
			return p, g + 1, true
		}
		s = once
		p = append(p, succ)
	}
	return nil, 0, false
}

// lastSlot finds, for an in-flight model, the fewest calls in flight
// (from 2) at which its limit binds with at least two retries allowed and
// two calls more than that open (each racing retry continues one), and the
// retries that leave one more allowed.
func lastSlot[S any](m model.Model[S]) (calls, retries int, ok bool) {
	for c := 2; c < 64; c++ {
		if n := inFlightAllowed(m, c); n >= 2 && n < c-1 {
			return c, n - 1, true
		}
	}
	return 0, 0, false
}

// inFlightAllowed returns how many retries, each continuing one of c open
// calls, the model grants in a row.
func inFlightAllowed[S any](m model.Model[S], c int) int {
	s := m.Init()
	for range c {
		s, _ = m.Step(s, model.OpRequest)
	}
	n := 0
	for n < c {
		var granted bool
		s, granted = m.Step(s, model.OpRetry(model.Transient))
		if !granted {
			break
		}
		n++
	}
	return n
}

// inFlightEdge finds, for an in-flight model, the first count of calls in
// flight (from 2) at which one call more allows one retry more in flight,
// and the retries those calls allow.
func inFlightEdge[S any](m model.Model[S]) (calls, retries int, ok bool) {
	allowed := func(c int) int { return inFlightAllowed(m, c) }
	prev := allowed(2)
	for c := 2; c < 64; c++ {
		next := allowed(c + 1)
		if next > prev && prev < c {
			return c, prev, true
		}
		prev = next
	}
	return 0, 0, false
}

// exhaustStage runs the exhaustive stage, and returns the first violation
// with the scenario and schedule that give it, or nil; it logs the
// schedules each scenario needed.
func (se *searcher[S]) exhaustStage(t *testing.T) (*Result[S], Scenario, string, *Finding, error) {
	var total int
	var short []string
	start := time.Now()
	scenarios := se.exhaustScenarios()
	// The smallest first: the schedules grow with the goroutines and the
	// calls, and the stage's count of them is spent on the small
	// scenarios, where a bug's witness is shortest, before the large.
	size := func(s Scenario) (int, int) {
		g, ops := len(s.Goroutines), 0
		if len(s.Clock) > 0 {
			g++
		}
		for _, l := range s.Goroutines {
			ops += len(l)
		}
		return g, ops + len(s.Clock)
	}
	slices.SortStableFunc(scenarios, func(a, b namedScenario) int {
		ga, oa := size(a.s)
		gb, ob := size(b.s)
		return cmp.Or(cmp.Compare(ga, gb), cmp.Compare(oa, ob))
	})
	complete, notRun := 0, 0
	type sized struct {
		namedScenario
		schedules int
	}
	var small []sized // complete at two preemptions in few schedules
	for _, ns := range scenarios {
		if se.blocked != "" {
			notRun++ // said once, below
			continue
		}
		if total >= exhaustTotal {
			notRun++
			short = append(short, fmt.Sprintf("%q (not run: the stage's %d schedules were spent)", ns.name, exhaustTotal))
			continue
		}
		if time.Since(start) > exhaustWithin {
			notRun++
			short = append(short, fmt.Sprintf("%q (not run: the stage ran past its guard of %v)", ns.name, exhaustWithin))
			continue
		}
		rep, viol, failing, inconclusive, err := se.exhaustOne(t, ns, preemptionBound, min(exhaustLimit, exhaustTotal-total), false)
		s := ns.s
		s.WallClock = se.tg.WallClock
		total += rep.Schedules
		if err != nil || inconclusive != nil {
			return nil, s, "", inconclusive, err
		}
		what := fmt.Sprintf("the exhaustive stage (every schedule with at most %d preemptions), scenario %q: %d schedules", rep.Bound, ns.name, rep.Schedules)
		if rep.Unguarded {
			what += " (a store outside any lock was seen, so no step inside a critical section was taken to commute with another)"
		}
		if viol != nil {
			return viol, failing, what + ", the last of them failing", nil, nil
		}
		if rep.Complete {
			complete++
			if rep.Schedules <= deepenFrom {
				small = append(small, sized{ns, rep.Schedules})
			}
		} else {
			short = append(short, fmt.Sprintf("%q (cut short after %d schedules; %d runs diverged)", ns.name, rep.Schedules, rep.Diverged))
		}
		t.Logf("%s: %s", se.name(), what)
	}
	// The one account of the stage's extent, which budgettest's parent
	// process prints on plain go test -v. A pass with scenarios cut short
	// is no failure (the random schedules run too), but it says less.
	se.summary(t, "exhaustive stage: %d of %d scenarios complete, %d cut short, %d not run; %d schedules in %v (limits: %s)",
		complete, len(scenarios), len(scenarios)-complete-notRun, notRun, total, time.Since(start).Round(time.Millisecond), exhaustLimits)
	// Then one preemption more for the small scenarios: a call that must
	// lose two optimistic attempts and then be preempted once more inside
	// its fallback needs three.
	// The scenarios made for a third preemption first, then the cheapest
	// at two: the likeliest to complete at three.
	slices.SortStableFunc(small, func(a, b sized) int {
		return cmp.Or(-cmp.Compare(btoi(a.deep()), btoi(b.deep())), cmp.Compare(a.schedules, b.schedules))
	})
	deep, deepShort, deepTotal, deepStart := 0, 0, 0, time.Now()
	for _, sz := range small {
		ns := sz.namedScenario
		if se.blocked != "" || deepTotal >= deepenTotal || time.Since(start) > exhaustWithin {
			continue // counted as not run, below
		}
		rep, viol, failing, inconclusive, err := se.exhaustOne(t, ns, preemptionBound+1, min(deepenLimit, deepenTotal-deepTotal), true)
		deepTotal += rep.Schedules
		if err != nil || inconclusive != nil {
			s := ns.s
			s.WallClock = se.tg.WallClock
			return nil, s, "", inconclusive, err
		}
		what := fmt.Sprintf("the exhaustive stage (every schedule with at most %d preemptions inside calls), scenario %q: %d schedules", rep.Bound, ns.name, rep.Schedules)
		if viol != nil {
			return viol, failing, what + ", the last of them failing", nil, nil
		}
		if rep.Complete {
			deep++
		} else {
			deepShort++
			what += " (cut short)"
		}
		t.Logf("%s: %s", se.name(), what)
	}
	if len(small) > 0 {
		// Counts only: a deepened scenario cut short is still complete at
		// two preemptions, which the line above says.
		se.summary(t, "exhaustive stage at %d preemptions inside calls: %d of %d small scenarios complete, %d cut short, %d not run; %d schedules in %v (limits: %s)",
			preemptionBound+1, deep, len(small), deepShort, len(small)-deep-deepShort, deepTotal, time.Since(deepStart).Round(time.Millisecond), deepenLimits)
	}
	for _, s := range short {
		se.summary(t, "exhaustive stage: not every schedule of %s", s)
	}
	if se.blocked != "" {
		se.summary(t, "exhaustive stage: stopped after three runs fell back to free running (%s)", firstLine(se.blocked))
	}
	return nil, Scenario{}, "", nil, nil
}

// exhaustOne runs one scenario of the exhaustive stage under every schedule
// with at most bound preemptions, up to limit schedules, and returns the
// first violation with the scenario and schedule that give it, or a
// finding when the check of a history was inconclusive.
func (se *searcher[S]) exhaustOne(t *testing.T, ns namedScenario, bound, limit int, inCalls bool) (exhaustReport, *Result[S], Scenario, *Finding, error) {
	s := ns.s
	s.WallClock = se.tg.WallClock
	var viol *Result[S]
	var failing Scenario
	var inconclusive *Finding
	var bubble func(func() error) error
	if se.tg.WallClock {
		// Each run in a bubble of its own, as every other run of a
		// wall-clock budget: outside one it reads the real clock.
		bubble = func(f func() error) error {
			return se.harness(t).InBubble(t, "an exhaustive run", func(*testing.T) error { return f() })
		}
	}
	rep, err := exhaust(context.Background(), s, se.harness(t).New, bound, limit, inCalls, func(h model.History, r sched.Report) bool {
		se.fellBack(r)
		res := Check(se.tg.Model, h, se.timeout())
		if res.Verdict == Linearizable {
			// Once a run fell back, every run would wait out its
			// stall the same way: the stage stops.
			return se.blocked != ""
		}
		if res.Verdict == Inconclusive {
			inconclusive = &Finding{Verdict: Inconclusive, Detail: fmt.Sprintf("%s: the exhaustive stage, %s: %s", se.name(), ns.name, res.Explain())}
			return true
		}
		o := r.Options
		failing = s
		failing.Control = &o
		viol = &res
		return true
	}, bubble)
	return rep, viol, failing, inconclusive, err
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

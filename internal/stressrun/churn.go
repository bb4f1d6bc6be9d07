package stressrun

import (
	"fmt"
	"strings"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/model"
)

// A churn finds a lost update: a charge or a credit that a concurrent call
// overwrote, the bug of a compare-and-swap loop that retries with a stale
// result, of a read-modify-write split across two locks, or of an add that
// is undone by a second write. It needs no order of the calls to be known.
//
// Each of a few goroutines runs a cycle of calls over and over: one retry,
// then the credits that give its charge back (a refund for a token bucket,
// ten successes for a gRPC throttle), or a lone retry the model denies,
// beside the others. The start state and the cycle are
// chosen on the model so that the state is a function of how far each
// goroutine is through its cycle, whatever the order of their calls:
// checked by computing the state at every combination of positions and
// confirming that each goroutine's next call takes it to the state of the
// next combination (no clamp is touched, no answer changes the state).
// Then the budget must end where it started; thousands of cycles give a
// lost update thousands of chances to happen, and a single one shows in
// the balance or in the answers after it.

// churnCalls is about how many calls each goroutine of a churn makes.
const churnCalls = 2_000

// churnMaxCredits bounds the credits of one cycle.
const churnMaxCredits = 32

// churnNudges bounds the calls a churn makes, one at a time, to reach a
// state it can start from.
const churnNudges = 40

// churnStates bounds the combinations of positions a churn's premise is
// checked at; fewer goroutines are used when the cycles are too long for more.
const churnStates = 20_000

// cycleFor returns the calls of a cycle of kind that leaves the model in s:
// the retry alone, when the model denies it and nothing changes; else the
// retry, then j of the first credit that brings it back; or nil.
func cycleFor[S any](m model.Model[S], s S, kind model.Kind) []model.Op {
	retry := model.OpRetry(kind)
	if t, _ := m.Step(s, retry); m.Equal(t, s) {
		return []model.Op{retry}
	}
	for _, credit := range []model.Op{model.OpSuccess(kind), model.OpSuccess(model.FirstAttempt), model.OpRequest} {
		t, _ := m.Step(s, retry)
		for j := 1; j <= churnMaxCredits; j++ {
			t, _ = m.Step(t, credit)
			if m.Equal(t, s) {
				cycle := []model.Op{retry}
				for range j {
					cycle = append(cycle, credit)
				}
				return cycle
			}
		}
	}
	return nil
}

// confluent reports whether, from s, the state of goroutines running
// cycles (goroutine i runs cycles[i] over and over) is a function of their
// positions in them: the premise of a churn.
func confluent[S any](m model.Model[S], s S, cycles [][]model.Op) bool {
	n := 1
	for _, c := range cycles {
		n *= len(c)
	}
	// states[i] is the state at the positions whose mixed-radix digits are
	// i, reached by running each goroutine's calls in turn: the last
	// goroutine's last call is the step from the state one digit lower.
	states := make([]S, n)
	states[0] = s
	for i := 1; i < n; i++ {
		unit, last, p := 1, 0, 0
		for k, c := range cycles {
			if d := i / unit % len(c); d > 0 {
				last, p = k, d
			}
			if k < len(cycles)-1 {
				unit *= len(c)
			}
		}
		u := 1
		for _, c := range cycles[:last] {
			u *= len(c)
		}
		states[i], _ = m.Step(states[i-u], cycles[last][p-1])
	}
	for i := range n {
		unit := 1
		for _, c := range cycles {
			l := len(c)
			p := i / unit % l
			next := i + unit
			if p == l-1 {
				next = i - (l-1)*unit // the cycle is done: back to its start
			}
			if t, _ := m.Step(states[i], c[p]); !m.Equal(t, states[next]) {
				return false
			}
			unit *= l
		}
	}
	return true
}

// churnPlan picks the cycles of a churn from s: two to four goroutines,
// all running the cycle of one kind or, one time in two, one goroutine
// running the other kind's (a retry that fails beside one that must be
// granted, say). It returns nil when no such plan is confluent, or when
// every cycle is a lone denied retry, which changes nothing.
func churnPlan[S any](src harness.Source, m model.Model[S], s S, kind model.Kind) [][]model.Op {
	other := model.Transient
	if kind == model.Transient {
		other = model.Throttled
	}
	main, alt := cycleFor(m, s, kind), cycleFor(m, s, other)
	if main == nil {
		return nil
	}
	mixed := alt != nil && src.IntN(2, "") == 0
	if len(main) == 1 && (!mixed || len(alt) == 1) {
		return nil // denials only: nothing changes, nothing can be lost
	}
	// Confluence for g goroutines implies it for their first g-1 (the
	// positions at which the last is at its start), so the plan grows
	// until it fails.
	var plan [][]model.Op
	for g := 2; g <= 4; g++ {
		cycles := make([][]model.Op, g)
		states := 1
		for i := range cycles {
			cycles[i] = main
			if mixed && i == 0 {
				cycles[i] = alt
			}
			states *= len(cycles[i])
		}
		if states > churnStates || !confluent(m, s, cycles) {
			break
		}
		plan = cycles
	}
	return plan
}

// churn walks the budget, one call at a time through call, to a state from
// which a churn plan is confluent (see churnPlan), and runs it. It returns
// what it did, or "" for a model with no such state near the current one
// (a ratio, whose credits never give a retry back). The caller compares
// the state afterwards.
func churn[S any](src harness.Source, m model.Model[S], state *S, b budget.Budget, call func(model.Op) (bool, error)) (string, error) {
	kind := harness.RetryKind(src)
	// Try the state reached, then states a credit or a retry away.
	nudge := model.OpRetry(kind)
	if src.IntN(2, "") == 0 {
		nudge = model.OpSuccess(kind)
	}
	var cycles [][]model.Op
	for n := 0; ; n++ {
		if cycles = churnPlan(src, m, *state, kind); cycles != nil {
			break
		}
		if n == churnNudges {
			return "", nil
		}
		// A nudge that changes nothing (a denied retry, a credit at the
		// clamp) turns the other way.
		if t, _ := m.Step(*state, nudge); m.Equal(t, *state) {
			if nudge.Op == model.Retry {
				nudge = model.OpSuccess(kind)
			} else {
				nudge = model.OpRetry(kind)
			}
		}
		if _, err := call(nudge); err != nil {
			return "", err
		}
	}
	if err := together(len(cycles), "a churn", func(g int) {
		for range max(1, churnCalls/len(cycles[g])) {
			for _, op := range cycles[g] {
				harness.Perform(b, op)
			}
		}
	}); err != nil {
		return "", err
	}
	var each []string
	for _, c := range cycles {
		d := c[0].String()
		if len(c) > 1 {
			d += fmt.Sprintf(" then %d × %v", len(c)-1, c[1])
		}
		each = append(each, d)
	}
	return fmt.Sprintf("a churn: %d goroutines running, about %d calls each, the cycles [%s], which in any order end where they started",
		len(cycles), churnCalls, strings.Join(each, "; ")), nil
}

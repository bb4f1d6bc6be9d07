package stressrun

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/procs"
	"github.com/retrybudget/retrybudget/model"
)

// BurstConfig says how Bursts runs.
type BurstConfig struct {
	// Goroutines is how many goroutines call the budget at once in a
	// burst. Zero means 8.
	Goroutines int
	// Rounds is how many bursts a run makes. Zero means 24.
	Rounds int
	// Duels is how many duels each round makes before its burst. Zero
	// means 12.
	Duels int
	// Seed chooses the rounds.
	Seed uint64
	// Stop, if not nil, ends the run early once it is set: the goroutines
	// of a burst start no more calls, the burst is checked on the calls
	// made (any k of its identical calls must give what the model gives
	// for k), and no round starts after it. A caller sets it from a timer
	// of its own, outside any synctest bubble, so that a correct budget
	// too slow under contention gives a shorter run rather than a stuck
	// one. Bursts reports whether it stopped so.
	Stop *atomic.Bool
}

// volumeCalls is how many calls a volume burst makes at one instant, all
// goroutines together: past 2^16.
const volumeCalls = 70_000

// A Mismatch is a burst, or a call of the walk before it, whose outcome no
// order of its calls explains.
type Mismatch struct {
	Round   int
	What    string   // the burst or the call, and what it gave
	Want    string   // what every order of it gives
	State   string   // the model's state before it
	History []string // the rounds before it, latest last
}

func (m *Mismatch) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "round %d: %s, but %s (model state before: %s)", m.Round, m.What, m.Want, m.State)
	if len(m.History) > 0 {
		fmt.Fprintf(&b, "\n  the rounds before it, latest last:\n    %s", strings.Join(m.History, "\n    "))
	}
	return b.String()
}

// Bursts checks a budget against any deterministic model, with bounds both
// ways, however the calls interleave. In each round many goroutines make
// the same call at once, several times each: every order of identical
// calls is the same sequence, so a linearizable budget that follows its
// model grants exactly what the model grants for that many calls from its
// state, no more (a check-then-act overspends) and no fewer (a lost credit
// underspends), and ends in the model's state, which the next round
// starts from. Between bursts, with no call in flight, Bursts may step the
// clock (any step harness.Step draws, boundaries and far jumps included)
// and walk the budget, one call at a time, to an edge: drained until the
// next retry is denied, or credited until a credit changes nothing, then
// nudged by one call, so that the next burst races at a threshold or at
// the clamp. Now and then a burst is a volume burst of 70,000 requests or
// successes at one instant. Every answer, and for a model.Balanced every
// balance between rounds, is compared with the model's. Each round also
// runs a hammer (see hammer), a churn (see churn.go) and Duels duels (see toEdge): two goroutines
// racing at the last grant, or through the credits that fit before a
// clamp.
//
// The budget is built on a ManualClock reading 0 (run Bursts inside the
// bubble for a wall-clock subject, whose steps are then sleeps). A panic
// in the factory or the budget is returned as a *harness.Fault. Bursts has
// no watchdog of its own: run it under harness.Guard.
func Bursts[S any](c BurstConfig, sub harness.Subject[S]) error {
	_, err := BurstsCut(c, sub)
	return err
}

// BurstsCut is Bursts, and also reports whether c.Stop cut the run short.
func BurstsCut[S any](c BurstConfig, sub harness.Subject[S]) (cut bool, err error) {
	_, release := procs.AtLeast(8)
	defer release()
	if c.Goroutines <= 0 {
		c.Goroutines = 8
	}
	if c.Rounds <= 0 {
		c.Rounds = 24
	}
	if c.Duels <= 0 {
		c.Duels = 12
	}
	err = bursts(c, sub)
	return c.Stop != nil && c.Stop.Load(), err
}

func bursts[S any](c BurstConfig, sub harness.Subject[S]) error {
	clock := new(budget.ManualClock)
	b, closeBudget := sub.Open(clock)
	defer closeBudget()
	m := sub.Model
	state := m.Init()
	balance := sub.Balance(b)
	src := harness.Rand(rand.New(rand.NewPCG(c.Seed, 0x6275727374)))
	var history []string
	note := func(s string) {
		if history = append(history, s); len(history) > 12 {
			history = history[1:]
		}
	}
	mismatch := func(round int, what, want, before string) error {
		return &Mismatch{Round: round, What: what, Want: want, State: before, History: history}
	}
	// one makes one call on its own, and compares it with the model.
	one := func(round int, op model.Op) (bool, error) {
		before := m.DescribeState(state)
		var want bool
		state, want = m.Step(state, op)
		got := harness.Perform(b, op)
		if got != want {
			return got, mismatch(round, fmt.Sprintf("%v, called alone, was %s", op, verdict(got)), "the model "+verdict(want)+" it", before)
		}
		return got, nil
	}
	stopped := func() bool { return c.Stop != nil && c.Stop.Load() }
	for round := 1; round <= c.Rounds && !stopped(); round++ {
		if sub.Timing.Scale > 0 && src.IntN(3, "") == 0 {
			d := harness.Step(src, sub.Timing, clock.Now())
			if !sub.Timing.Forward || d > 0 {
				sub.Advance(clock, d)
				state, _ = m.Step(state, model.OpAdvance(d))
				note(fmt.Sprintf("the clock moved by %v", d))
			}
		}
		if src.IntN(2, "") == 0 {
			n, op, err := walk(src, m, &state, func(op model.Op) (bool, error) { return one(round, op) })
			if err != nil {
				return err
			}
			note(fmt.Sprintf("%d × %v, one at a time, to the edge", n, op))
			if src.IntN(2, "") == 0 {
				op := harness.Call(src)
				got, err := one(round, op)
				if err != nil {
					return err
				}
				note(model.Describe(op, got) + ", alone")
			}
		}
		{
			desc, err := hammer(src, m, &state, b, func(op model.Op) (bool, error) { return one(round, op) })
			if err != nil {
				if h, ok := err.(*hammered); ok {
					return mismatch(round, h.what, h.want, h.before)
				}
				return err
			}
			if desc != "" {
				note(desc)
			}
		}
		{
			desc, err := churn(src, m, &state, b, func(op model.Op) (bool, error) { return one(round, op) })
			if err != nil {
				return err
			}
			if desc != "" {
				note(desc)
				if err := checkBalance(balance, state, round, &history, m.DescribeState); err != nil {
					return err
				}
			}
		}
		for range c.Duels {
			op, each, ok, err := toEdge(src, m, &state, func(op model.Op) (bool, error) { return one(round, op) })
			if err != nil {
				return err
			}
			if !ok {
				break // the model has no such edge from here
			}
			if err := checkBalance(balance, state, round, &history, m.DescribeState); err != nil {
				return err
			}
			before := m.DescribeState(state)
			got, calls, err := burst(b, op, duelists, each, nil)
			if err != nil {
				return err
			}
			want := 0
			for range calls {
				var g bool
				if state, g = m.Step(state, op); g {
					want++
				}
			}
			if op.Op == model.Retry && got != want {
				return mismatch(round, fmt.Sprintf("%d goroutines × %d × %v at once granted %d", duelists, each, op, got), fmt.Sprintf("every order of them grants exactly %d", want), before)
			}
			note(fmt.Sprintf("a duel: %d goroutines × %d × %v at once", duelists, each, op))
		}
		if err := checkBalance(balance, state, round, &history, m.DescribeState); err != nil {
			return err
		}
		op, each := burstOp(src, c.Goroutines)
		before := m.DescribeState(state)
		got, calls, err := burst(b, op, c.Goroutines, each, c.Stop)
		if err != nil {
			return err
		}
		var want int
		for range calls {
			var g bool
			if state, g = m.Step(state, op); g {
				want++
			}
		}
		what := fmt.Sprintf("%d goroutines × %d × %v at once", c.Goroutines, each, op)
		if calls < c.Goroutines*each {
			what = fmt.Sprintf("%d goroutines × %d × %v at once, stopped after %d calls", c.Goroutines, each, op, calls)
		}
		if op.Op == model.Retry && got != want {
			return mismatch(round, fmt.Sprintf("%s granted %d", what, got), fmt.Sprintf("every order of those calls grants exactly %d", want), before)
		}
		if op.Op == model.Retry {
			what += fmt.Sprintf(": %d granted", got)
		}
		note(what)
		if err := checkBalance(balance, state, round, &history, m.DescribeState); err != nil {
			return err
		}
	}
	return nil
}

// checkBalance compares the budget's balance with the model's, when both
// report one, while no call is in flight.
func checkBalance[S any](balance func(S) error, state S, round int, history *[]string, describe func(S) string) error {
	if balance == nil {
		return nil
	}
	if err := balance(state); err != nil {
		return &Mismatch{Round: round, What: "with no call in flight, " + err.Error(), Want: "the balance is the model's", State: describe(state), History: *history}
	}
	return nil
}

// walkLimit bounds the calls of one walk to an edge.
const walkLimit = 20_000

// walk takes the budget to an edge, one call at a time through call: it
// retries until the model denies a retry, or credits until a credit no
// longer changes the model's state. It returns how many calls it made and
// of what.
func walk[S any](src harness.Source, m model.Model[S], state *S, call func(model.Op) (bool, error)) (int, model.Op, error) {
	if src.IntN(2, "") == 0 {
		op := model.OpRetry(harness.RetryKind(src))
		for n := 1; n <= walkLimit; n++ {
			granted, err := call(op)
			if err != nil || !granted {
				return n, op, err
			}
		}
		return walkLimit, op, nil
	}
	op := model.OpSuccess(model.Kind(src.IntN(3, "")))
	for n := 1; n <= walkLimit; n++ {
		before := *state
		if _, err := call(op); err != nil {
			return n, op, err
		}
		if m.Equal(before, *state) {
			return n, op, nil
		}
	}
	return walkLimit, op, nil
}

// duelists is how many goroutines make a duel's call at once: two, as
// many as a machine of two cores runs at once.
const duelists = 2

// maxVolley bounds the credits of one duel.
const maxVolley = 512

// toEdge walks the budget, one call at a time through call, to a state
// where a duel of identical calls is decided by their order, and returns
// the call and how many times each duelist makes it. For a retry, that is
// a state in which the model grants the next retry and denies the one
// after it, and each duelist retries once: a budget that checks and then
// acts grants both. For a credit (a success of any kind, or a request), a
// state from which each of the next credits changes the model's state, as
// many as fit before a clamp (at most maxVolley), shared among the
// duelists: a budget that loses an update keeps fewer. ok is false when
// the walk finds no such state within walkLimit calls.
func toEdge[S any](src harness.Source, m model.Model[S], state *S, call func(model.Op) (bool, error)) (op model.Op, each int, ok bool, err error) {
	if src.IntN(2, "") == 0 {
		op = model.OpRetry(harness.RetryKind(src))
		credits := []model.Op{model.OpSuccess(op.Kind), model.OpSuccess(model.FirstAttempt), model.OpRequest}
		for range walkLimit {
			s1, g1 := m.Step(*state, op)
			if g1 {
				if _, g2 := m.Step(s1, op); !g2 {
					return op, 1, true, nil
				}
				if _, err := call(op); err != nil {
					return op, 0, false, err
				}
				continue
			}
			// Denied: credit the budget, with the first credit that
			// changes the model's state.
			i := slices.IndexFunc(credits, func(c model.Op) bool { s2, _ := m.Step(*state, c); return !m.Equal(*state, s2) })
			if i < 0 {
				return op, 0, false, nil
			}
			if _, err := call(credits[i]); err != nil {
				return op, 0, false, err
			}
		}
		return op, 0, false, nil
	}
	op = []model.Op{model.OpSuccess(model.FirstAttempt), model.OpSuccess(model.Transient), model.OpSuccess(model.Throttled), model.OpRequest}[src.IntN(4, "")]
	drain := model.OpRetry(harness.RetryKind(src))
	for range walkLimit {
		s1, _ := m.Step(*state, op)
		s2, _ := m.Step(s1, op)
		if !m.Equal(*state, s1) && !m.Equal(s1, s2) {
			n, s := 0, *state
			for n < maxVolley {
				next, _ := m.Step(s, op)
				if m.Equal(s, next) {
					break
				}
				s, n = next, n+1
			}
			return op, max(n/duelists, 1), true, nil
		}
		if _, g := m.Step(*state, drain); !g {
			return op, 0, false, nil // nothing left to drain, and still no room
		}
		if _, err := call(drain); err != nil {
			return op, 0, false, err
		}
	}
	return op, 0, false, nil
}

// hammerIterations is how many retries each goroutine of a hammer makes.
const hammerIterations = 6_000

// hammered is a hammer that saw more grants outstanding than the model
// allows.
type hammered struct{ what, want, before string }

func (h *hammered) Error() string { return h.what + ", but " + h.want }

// hammer walks the budget to a state s0 from which the model grants
// exactly k retries of one kind in a row (k from 1 to 3), where a denied
// retry changes nothing and a success of that kind refunds a grant
// exactly; then k+1 goroutines each retry, and refund every grant, over
// and over. From s0 every order of those calls keeps at most k grants
// unrefunded, so a goroutine that returns from a grant while k others are
// between theirs and their refunds has seen a grant no order explains: a
// check-then-act, caught on whichever retry of thousands loses the race.
// At the end the budget must be back at s0, or a refund was lost. It does
// nothing, and returns "", for a model without such a state (a throttle,
// whose denials take tokens; a ratio, which refunds nothing).
func hammer[S any](src harness.Source, m model.Model[S], state *S, b budget.Budget, call func(model.Op) (bool, error)) (string, error) {
	kind := harness.RetryKind(src)
	retry, refund := model.OpRetry(kind), model.OpSuccess(kind)
	k := 1 + src.IntN(3, "")
	// Drain, then refund k grants.
	for n := 0; ; n++ {
		if _, g := m.Step(*state, retry); !g {
			break
		}
		if n == walkLimit {
			return "", nil
		}
		if _, err := call(retry); err != nil {
			return "", err
		}
	}
	for range k {
		if _, err := call(refund); err != nil {
			return "", err
		}
	}
	// The premise: s0 … sk by grants, sk denies and stays, and each
	// refund undoes a grant.
	s := []S{*state}
	for i := range k + 1 {
		next, g := m.Step(s[i], retry)
		if i == k {
			if g || !m.Equal(next, s[i]) {
				return "", nil
			}
			break
		}
		if back, _ := m.Step(next, refund); !g || !m.Equal(back, s[i]) {
			return "", nil
		}
		s = append(s, next)
	}
	before := m.DescribeState(*state)
	var outstanding, most atomic.Int32
	workers := k + 1
	if err := together(workers, "a hammer", func(int) {
		for range hammerIterations {
			if !harness.Perform(b, retry) {
				continue
			}
			x := outstanding.Add(1)
			for {
				seen := most.Load()
				if x <= seen || most.CompareAndSwap(seen, x) {
					break
				}
			}
			outstanding.Add(-1)
			harness.Perform(b, refund)
		}
	}); err != nil {
		return "", err
	}
	what := fmt.Sprintf("%d goroutines, each retrying %v %d times and refunding every grant", workers, retry, hammerIterations)
	if got := int(most.Load()); got > k {
		return "", &hammered{what: fmt.Sprintf("%s, had %d grants unrefunded at once", what, got),
			want: fmt.Sprintf("from this state the model grants %d in a row, so no order keeps more than %d unrefunded", k, k), before: before}
	}
	// Back at s0: the k grants the model allows must all be there.
	for i := range k + 1 {
		if _, err := call(retry); err != nil {
			if mm, ok := err.(*Mismatch); ok {
				mm.What = fmt.Sprintf("after %s, retry %d of %d: %s", what, i+1, k+1, mm.What)
				mm.State = before + " before the hammer; " + mm.State
			}
			return "", err
		}
	}
	return what, nil
}

// burstOp draws the call of a burst and how many times each goroutine
// makes it: mostly retries, a few times each; one burst in eight is a
// volume burst of requests or first-attempt successes.
func burstOp(src harness.Source, goroutines int) (model.Op, int) {
	if src.IntN(8, "") == 0 {
		op := model.OpRequest
		if src.IntN(2, "") == 0 {
			op = model.OpSuccess(model.FirstAttempt)
		}
		return op, (volumeCalls + goroutines - 1) / goroutines
	}
	each := []int{1, 2, 3, 8, 32, 100, 300}[src.IntN(7, "")]
	if src.IntN(3, "") == 0 {
		return harness.Call(src), each
	}
	return model.OpRetry(harness.RetryKind(src)), each
}

// burst has goroutines goroutines make op each times, all released at
// once, and returns how many calls were granted and how many were made, or
// the first panic. Once stop (if not nil) is set, no goroutine starts
// another call.
func burst(b budget.Budget, op model.Op, goroutines, each int, stop *atomic.Bool) (granted, calls int, err error) {
	grants := make([]int, goroutines)
	made := make([]int, goroutines)
	faults := make([]error, goroutines)
	var ready atomic.Int32
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			// Spin until every goroutine is here, so that they start
			// together rather than one by one as the scheduler wakes
			// them: the calls overlap from the first.
			ready.Add(1)
			for ready.Load() < int32(goroutines) {
				runtime.Gosched()
			}
			faults[g] = harness.Catch(fmt.Sprintf("goroutine %d of a burst", g+1), func() {
				for range each {
					if stop != nil && stop.Load() {
						return
					}
					made[g]++
					if harness.Perform(b, op) {
						grants[g]++
					}
				}
			})
		})
	}
	wg.Wait()
	for g, n := range grants {
		if faults[g] != nil {
			return 0, 0, faults[g]
		}
		granted += n
		calls += made[g]
	}
	return granted, calls, nil
}

func verdict(granted bool) string {
	if granted {
		return "granted"
	}
	return "denied"
}

// together runs f on n goroutines, released at once when all have
// started (spinning, and yielding now and then so that none starves the
// others), each under harness.Catch, and returns the first panic, named
// as a goroutine of what.
func together(n int, what string, f func(g int)) error {
	faults := make([]error, n)
	var ready atomic.Int32
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			ready.Add(1)
			for i := 0; ready.Load() < int32(n); i++ {
				if i%1000 == 999 {
					runtime.Gosched()
				}
			}
			faults[g] = harness.Catch(fmt.Sprintf("goroutine %d of %s", g+1, what), func() { f(g) })
		})
	}
	wg.Wait()
	for _, e := range faults {
		if e != nil {
			return e
		}
	}
	return nil
}

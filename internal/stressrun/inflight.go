package stressrun

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/procs"
	"github.com/retrybudget/retrybudget/model"
)

// InFlightConfig says how hard InFlight pushes.
type InFlightConfig struct {
	// Goroutines is how many goroutines make calls at once, each one call
	// at a time. Zero means 64.
	Goroutines int
	// Rounds is how many retries each goroutine asks for in a phase.
	// Zero means 50.
	Rounds int
	// Phases is how many phases the run makes. Zero means 8.
	Phases int
	// Timeout bounds the whole run. Zero means 60s.
	Timeout time.Duration
	Seed    uint64
}

// An InFlightViolation is a grant an in-flight budget's rule forbids, or a
// count a quiescent budget got wrong.
type InFlightViolation struct{ msg string }

func (v *InFlightViolation) Error() string { return v.msg }

// InFlight hammers an in-flight budget (a structured model that is a
// model.InFlightLimit) and checks the rule at every grant.
//
// Each phase opens some calls on one goroutine, the background, and holds
// some retries in flight, then Goroutines goroutines each make calls one
// at a time: a call's first attempt fails at once, and it asks for
// retries, each granted retry held in flight for a moment and then ended;
// a denied retry ends the call, and the goroutine starts another. So the
// calls in flight never exceed the background's plus one a goroutine, and
// the rule, being monotone, never admits more retries in flight than it
// admits with that many calls: the limit L. After every grant the
// goroutine counts the retries surely in flight (granted and returned,
// their ends not yet begun, and the background's) and fails if they are
// more than L: two grants decided on one stale count. That holds whatever
// the interleaving, so a correct budget never fails it.
//
// Between phases, with nothing in flight but the background, the run asks
// the budget for retries one at a time, and the grants must be the
// model's: a permit that leaked (a release skipped) or was given back twice
// shows there. Everything then ends, and the next phase begins.
func InFlight[S any](c InFlightConfig, sub harness.Subject[S]) error {
	lim, ok := sub.Model.(model.InFlightLimit)
	if !ok || !harness.IsStructured(sub.Model) {
		return fmt.Errorf("stressrun: %T is not a structured model.InFlightLimit", sub.Model)
	}
	_, release := procs.AtLeast(8)
	defer release()
	if c.Goroutines <= 0 {
		c.Goroutines = 64
	}
	if c.Rounds <= 0 {
		c.Rounds = 50
	}
	if c.Phases <= 0 {
		c.Phases = 8
	}
	return harness.Guard("the in-flight stress run", c.Timeout, func() error {
		return inFlight(c, sub, lim)
	})
}

// maxLimit is the largest limit InFlight checks: a rule that admits more
// retries in flight than this with the calls of a phase is not bounded by
// the goroutines of a run, so nothing can exceed it.
const maxLimit = 1 << 16

func inFlight[S any](c InFlightConfig, sub harness.Subject[S], lim model.InFlightLimit) error {
	b, closeBudget := sub.Open(new(budget.ManualClock))
	defer closeBudget()
	rng := rand.New(rand.NewPCG(c.Seed, 0xf11e))
	m := sub.Model
	for p := range c.Phases {
		// The background: calls in flight, and retries held through the
		// phase. Their grants follow the model (checked after the phase).
		background := rng.IntN(80)
		for range background {
			harness.Perform(b, model.OpRequest)
			harness.Perform(b, model.OpAttemptEnd(model.FirstAttempt))
		}
		var held int64
		for range rng.IntN(6) {
			if harness.Perform(b, model.OpRetry(model.Transient)) {
				held++
			}
		}
		calls := int64(background + c.Goroutines)
		limit := int64(0)
		for limit < maxLimit && lim.Admits(limit, calls) {
			limit++
		}
		var granted, ended atomic.Int64 // grants returned, retry ends begun
		var bad atomic.Pointer[string]
		faults := make([]error, c.Goroutines)
		var wg sync.WaitGroup
		var ready sync.WaitGroup
		start := make(chan struct{})
		for g := range c.Goroutines {
			ready.Add(1)
			wg.Go(func() {
				r := rand.New(rand.NewPCG(c.Seed, uint64(p)<<20|uint64(g)))
				ready.Done()
				<-start
				faults[g] = harness.Catch(fmt.Sprintf("goroutine %d of the in-flight stress run", g+1), func() {
					harness.Perform(b, model.OpRequest)
					harness.Perform(b, model.OpAttemptEnd(model.FirstAttempt))
					for range c.Rounds {
						k := model.Transient
						if r.IntN(2) == 0 {
							k = model.Throttled
						}
						if !harness.Perform(b, model.OpRetry(k)) {
							// A denial ends the call; the goroutine starts another.
							harness.Perform(b, model.OpCallEnd)
							harness.Perform(b, model.OpRequest)
							harness.Perform(b, model.OpAttemptEnd(model.FirstAttempt))
							continue
						}
						sure := granted.Add(1) - ended.Load() + held
						if limit < maxLimit && sure > limit {
							msg := fmt.Sprintf("phase %d: %d retries were in flight at once (%d granted and returned, their ends not begun, %d held by the background), "+
								"but with at most %d calls in flight the rule admits %d: two retries were granted on one count",
								p+1, sure, sure-held, held, calls, limit)
							bad.CompareAndSwap(nil, &msg)
						}
						spin(r.IntN(2000)) // the retry's attempt
						ended.Add(1)
						harness.Perform(b, model.OpAttemptEnd(k))
						if r.IntN(4) == 0 {
							runtime.Gosched()
						}
					}
					harness.Perform(b, model.OpCallEnd)
				})
			})
		}
		ready.Wait()
		close(start)
		wg.Wait()
		for _, f := range faults {
			if f != nil {
				return f
			}
		}
		if msg := bad.Load(); msg != nil {
			return &InFlightViolation{*msg}
		}
		// Quiescent: only the background is in flight. The grants from
		// here, one at a time, must be the model's from the same counts.
		state := m.Init()
		for range background {
			state, _ = m.Step(state, model.OpRequest)
		}
		for range held {
			state, _ = m.Step(state, model.OpRetry(model.Transient))
		}
		var got, want int
		for got < maxLimit {
			ok := harness.Perform(b, model.OpRetry(model.Throttled))
			before := m.DescribeState(state)
			var w bool
			state, w = m.Step(state, model.OpRetry(model.Throttled))
			if w {
				want++
			}
			if !ok {
				if w {
					return &InFlightViolation{fmt.Sprintf("phase %d: once every call of the goroutines had ended, with %d calls and %d retries in flight, "+
						"the budget granted %d more retries and denied the next, which the model grants (model state before it: %s): "+
						"a retry whose attempt had ended was still counted in flight, released late or not at all", p+1, background, held, got, before)}
				}
				break
			}
			got++
			if !w {
				return &InFlightViolation{fmt.Sprintf("phase %d: once every call of the goroutines had ended, with %d calls and %d retries in flight, "+
					"the budget granted %d more retries where the model grants %d: a retry was released twice, or a call counted that had ended", p+1, background, held, got, want)}
			}
		}
		for range got {
			harness.Perform(b, model.OpAttemptEnd(model.Throttled))
		}
		for range held {
			harness.Perform(b, model.OpAttemptEnd(model.Transient))
		}
		for range background {
			harness.Perform(b, model.OpCallEnd)
		}
	}
	return inFlightBursts(c, b, m, rng)
}

// Bursts of the in-flight run.
const (
	burstWorkers = 2 // on two cores both run at once
	burstGroups  = 40
	burstRounds  = 250 // in each group
	// burstOverlaps is how many rounds whose two calls overlapped in
	// time a run makes at least: two threads on two cores share one now
	// and then, on a busy machine often, and their calls overlap only
	// when they run at once. burstCap bounds the time that takes.
	burstOverlaps = 5000
	burstCap      = 3 * time.Second
	// burstRetries is how many overlapping rounds a smaller count of calls
	// is tried for in a pass of the minimization, and minimizeTime bounds
	// the minimization.
	burstRetries = 1000
	minimizeTime = 2 * time.Second
	burstSpin    = 1 << 16 // polls of the round before a worker blocks
)

// A BurstViolation is a burst round whose grants no order of its calls
// explains, with the smallest counterexample found: its Scenario holds
// the operations, its History what the budget answered.
type BurstViolation struct {
	InFlightViolation
	Round         int // of the contention that found it
	Calls, Held   int // in flight when the workers asked
	Granted, Want int
	Before        []model.Op // what brings the model to that state
}

// contender makes burstWorkers calls at once: one on a worker goroutine
// and one on the goroutine that releases it, so that on two cores both
// run and nothing else needs a core. The worker polls for its release, so
// that the two calls start within nanoseconds of each other (a random
// delay before each samples their relative offset), and blocks when a
// round is slow to come.
type contender struct {
	b      budget.Budget
	r      *rand.Rand
	cur    atomic.Pointer[release]
	done   atomic.Int64 // the last round the worker finished
	worker atomic.Bool  // the worker's grant in the current round
	// stamps: the worker's call and return in the current round, and
	// overlaps, the rounds whose two calls overlapped in time.
	seq, wCall, wReturn atomic.Int64
	overlaps            int
	wake                chan struct{}
	stop                chan struct{}
	fault               error
	wg                  sync.WaitGroup
	n                   int64
}

type release struct {
	n  int64
	ch chan struct{}
}

func newContender(b budget.Budget, seed uint64) *contender {
	c := &contender{b: b, r: rand.New(rand.NewPCG(seed, 0xb0057)), stop: make(chan struct{}), wake: make(chan struct{}, 1)}
	c.cur.Store(&release{ch: make(chan struct{})})
	var ball atomic.Int64
	var warm atomic.Bool
	c.wg.Go(func() {
		play(&ball, &warm)
		r := rand.New(rand.NewPCG(seed, 0xb0058))
		for n := int64(1); ; n++ {
			rel := c.cur.Load()
			for i := 0; rel.n < n && i < burstSpin; i++ {
				rel = c.cur.Load()
			}
			for rel.n < n {
				select {
				case <-rel.ch:
				case <-c.stop:
					return
				}
				rel = c.cur.Load()
			}
			spin(r.IntN(128))
			c.fault = harness.Catch("the second goroutine of the in-flight bursts", func() {
				c.wCall.Store(c.seq.Add(1))
				c.worker.Store(harness.Perform(b, model.OpRetry(model.Transient)))
				c.wReturn.Store(c.seq.Add(1))
			})
			c.done.Store(n)
			select {
			case c.wake <- struct{}{}:
			default:
			}
			if c.fault != nil {
				return
			}
		}
	})
	warmUp(&ball)
	warm.Store(true)
	return c
}

// round makes the two calls once and returns how many were granted.
func (c *contender) round() (int, error) {
	c.n++
	prev := c.cur.Load()
	c.cur.Store(&release{n: c.n, ch: make(chan struct{})})
	close(prev.ch)
	spin(c.r.IntN(128))
	mine := false
	var call, ret int64
	if err := harness.Catch("the first goroutine of the in-flight bursts", func() {
		call = c.seq.Add(1)
		mine = harness.Perform(c.b, model.OpRetry(model.Transient))
		ret = c.seq.Add(1)
	}); err != nil {
		return 0, err
	}
	for i := 0; c.done.Load() < c.n; i++ {
		if i >= burstSpin {
			select {
			case <-c.wake:
			case <-time.After(time.Millisecond):
			}
		}
	}
	if c.fault != nil {
		return 0, c.fault
	}
	if wc, wr := c.wCall.Load(), c.wReturn.Load(); wc < ret && call < wr {
		c.overlaps++
	}
	got := 0
	if mine {
		got++
	}
	if c.worker.Load() {
		got++
	}
	return got, nil
}

// warmUp passes ball back and forth with the worker (see play) until 256
// passes in a row each take under 2µs, or 100ms pass: a goroutine just
// started may share a core with the one that started it until the
// operating system moves its thread, some milliseconds later, and two
// calls on one core never overlap.
func warmUp(ball *atomic.Int64) {
	deadline := time.Now().Add(100 * time.Millisecond)
	for fast := 0; fast < 256 && time.Now().Before(deadline); {
		v := ball.Add(1) // odd: the worker's turn
		start := time.Now()
		for ball.Load() == v && time.Now().Before(deadline) {
		}
		if time.Since(start) < 2*time.Microsecond {
			fast++
		} else {
			fast = 0
		}
	}
}

// play is the worker's side of warmUp, until warm is set.
func play(ball *atomic.Int64, warm *atomic.Bool) {
	for i := 0; !warm.Load(); i++ {
		if v := ball.Load(); v%2 == 1 {
			ball.CompareAndSwap(v, v+1)
		}
		if i%1024 == 1023 {
			runtime.Gosched()
		}
	}
}

func (c *contender) close() {
	close(c.stop)
	c.wg.Wait()
}

// contend opens calls calls on b, fills it to its limit one retry at a
// time, and makes up to rounds rounds, each freeing one slot for the
// workers to contend for; exactly what the model grants for that many
// identical calls must be granted, whatever their order, since every order
// of identical calls is the same sequence. It ends everything it started,
// and returns the first round whose grants differ, or nil.
func contend[S any](c *contender, m model.Model[S], calls, rounds int) (*BurstViolation, error) {
	b := c.b
	state := m.Init()
	var before []model.Op
	do := func(op model.Op) bool {
		var want bool
		state, want = m.Step(state, op)
		return harness.Perform(b, op) == want
	}
	held := 0
	defer func() {
		for range held {
			harness.Perform(b, model.OpAttemptEnd(model.Transient))
		}
		for range calls {
			harness.Perform(b, model.OpCallEnd)
		}
	}()
	for range calls {
		do(model.OpRequest)
		do(model.OpAttemptEnd(model.FirstAttempt))
		before = append(before, model.OpRequest)
	}
	for held < maxLimit {
		if _, g := m.Step(state, model.OpRetry(model.Transient)); !g {
			break // the model denies the next: full
		}
		held++
		if !do(model.OpRetry(model.Transient)) {
			held--
			return nil, &InFlightViolation{fmt.Sprintf("filling the budget one retry at a time, with %d calls in flight, it denied retry %d, which the model grants", calls, held+1)}
		}
		before = append(before, model.OpRetry(model.Transient))
	}
	for round := range rounds {
		if held > 0 {
			do(model.OpAttemptEnd(model.Transient))
			held--
			before = before[:len(before)-1]
		}
		want, ws := 0, state
		for range burstWorkers {
			var g bool
			if ws, g = m.Step(ws, model.OpRetry(model.Transient)); g {
				want++
			}
		}
		got, err := c.round()
		held += got
		if err != nil {
			return nil, err
		}
		if got != want {
			return &BurstViolation{Round: round + 1, Calls: calls, Held: held - got, Granted: got, Want: want, Before: slices.Clone(before)}, nil
		}
		state = ws
		before = append(before, make([]model.Op, want)...)
		for i := range want {
			before[len(before)-1-i] = model.OpRetry(model.Transient)
		}
	}
	return nil, nil
}

// inFlightBursts makes burstGroups groups of burstRounds rounds, each with
// a random number of calls in flight (see contend). On a violation it
// looks for the fewest calls, from one a worker, at which the rounds
// still fail, so that the counterexample is as short as it can be.
func inFlightBursts[S any](c InFlightConfig, b budget.Budget, m model.Model[S], rng *rand.Rand) error {
	ct := newContender(b, c.Seed)
	defer ct.close()
	start := time.Now()
	for g := 0; g < burstGroups || ct.overlaps < burstOverlaps; g++ {
		if time.Since(start) > burstCap {
			break // a machine so busy that the two calls seldom run at once
		}
		v, err := contend(ct, m, rng.IntN(60), burstRounds)
		if err != nil || v == nil {
			if err != nil {
				return err
			}
			continue
		}
		// Passes over the smaller counts, fewest first, each count tried
		// until its calls have overlapped burstRetries times in a pass: a
		// count may fail only when its two calls run at once.
		var fewer []int
		for calls := burstWorkers; calls < v.Calls; calls += max(1, calls/4) {
			fewer = append(fewer, calls)
		}
		for t := time.Now(); len(fewer) > 0 && time.Since(t) < minimizeTime; {
			for i, calls := range fewer {
				var w *BurstViolation
				for from := ct.overlaps; w == nil && ct.overlaps-from < burstRetries && time.Since(t) < minimizeTime; {
					if w, err = contend(ct, m, calls, burstRounds); err != nil {
						return err
					}
				}
				if w != nil {
					v, fewer = w, fewer[:i]
					break
				}
			}
		}
		v.msg = v.describe(m)
		return v
	}
	return nil
}

// describe explains v: the operations, the answers, and the model's
// grants.
func (v *BurstViolation) describe(m any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "with %d calls and %d retries in flight, %d goroutines asked for a retry at once and %d were granted, where every order of those calls grants %d; "+
		"the counterexample, %d operations:\n", v.Calls, v.Held, burstWorkers, v.Granted, v.Want, len(v.Before)+burstWorkers)
	fmt.Fprintf(&b, "  pre:  %s\n", opList(v.Before))
	for w := range burstWorkers {
		verdict := "denied"
		if w < v.Granted {
			verdict = "granted"
		}
		fmt.Fprintf(&b, "  g%d:   %v -> %s   (the %d calls overlap)\n", w+1, model.OpRetry(model.Transient), verdict, burstWorkers)
	}
	return strings.TrimRight(b.String(), "\n")
}

func opList(ops []model.Op) string {
	s := make([]string, len(ops))
	for i, op := range ops {
		s[i] = op.String()
	}
	return strings.Join(s, ", ")
}

var spinSink atomic.Int64

// spin busy-waits for about n nanoseconds: a retry's attempt, long enough
// that the grants of other goroutines overlap it.
func spin(n int) {
	for range n {
		spinSink.Load()
	}
}

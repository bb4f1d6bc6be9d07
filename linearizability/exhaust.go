package linearizability

import (
	"context"
	"math/bits"
	"slices"
	"sync"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/sched"
	"github.com/retrybudget/retrybudget/model"
)

// preemptionBound is the preemption bound of exhaust when none is given:
// a bug that needs at most two preemptions (one goroutine stopped inside a
// call while another completes several, and stopped once more) is within
// it.
const preemptionBound = 2

// exhaustSpinLimit is the SpinLimit of exhaust's runs.
const exhaustSpinLimit = 1000

// An exhaustReport says how far an exhaustive exploration went.
type exhaustReport struct {
	// Schedules is the number of controlled runs made, one per schedule.
	Schedules int
	// Bound is the preemption bound the schedules kept to.
	Bound int
	// Complete is set when every schedule of the scenario with at most
	// Bound preemptions was run: the exploration was not cut short by its
	// limit, by a visit that stopped it, or by a run that could not be
	// branched from (one that fell back to free running).
	Complete bool
	// Diverged counts the runs whose schedule did not replay: the code did
	// something else the second time, so some schedules may be missed.
	Diverged int
	// Unguarded is set when a run showed a store into a field, inside an
	// operation, by a goroutine that held no mutex (sched.Choice.Unguarded):
	// the code may race, and the search, started again from the first
	// schedule, took no step inside a critical section to commute with
	// another (see branches).
	Unguarded bool
}

// exhaust records s under control once for every schedule with at most
// bound preemptions (zero means two), and calls visit
// with each run's history and report, until visit returns true, limit
// runs have been made (zero means no limit), or the schedules run out.
//
// It is iterative preemption bounding, as in CHESS (Musuvathi and Qadeer,
// "Iterative Context Bounding for Systematic Testing of Multithreaded
// Programs", PLDI 2007): each run follows a prefix of choices and then runs
// serially, never preempting; every step of the run past its prefix where
// another goroutine could have been chosen becomes a new prefix, if the
// preemptions it costs keep within the bound. Each schedule is run once.
// A preemption is a switch away from a goroutine that could have gone on;
// a switch at a goroutine's block, return or spin costs none, so a
// goroutine stopped after a read while another runs several whole calls
// costs one. Schedules that differ only in the order of steps that commute
// (see sched.Choice.Obj) are pruned by sleep sets (see branches).
//
// The schedules run in order of how many of their choices differ from
// the serial order, a free switch at a block included (delay bounding:
// Emmi, Qadeer and Rakamarić, "Delay-Bounded Scheduling", POPL 2011), so
// that a search cut short by limit has run the schedules closest to the
// serial one first. Where many goroutines block and wake on channels,
// the free switches alone give more schedules within the bound than a
// limit lets run, and most bugs need only one or two changes of order.
//
// s.Control, if set, gives the options the runs start from (a MaxSteps
// say); its Schedule and Strategy are replaced. A run that falls back to
// free running, or reaches its step bound, is visited and not branched
// from; the report is then not Complete.
//
// inBubble, when not nil, runs each recorded run: in the testing/synctest
// bubble of a wall-clock subject, whose budget reads time.Now.
func exhaust(ctx context.Context, s Scenario, newBudget func(budget.Clock) budget.Budget, bound, limit int, inCalls bool,
	visit func(model.History, sched.Report) (stop bool), inBubble ...func(func() error) error) (exhaustReport, error) {
	if bound <= 0 {
		bound = preemptionBound
	}
	rep := exhaustReport{Bound: bound, Complete: true}
	var base sched.Options
	if s.Control != nil {
		base = *s.Control
	}
	// Every field access a step of its own, inside critical sections too:
	// the sleep sets take those steps to commute with the rest, and prune
	// the schedules they would add, while a run that shows a store
	// outside any lock has them ordered every way (see branches).
	base.Strategy, base.Choices, base.Fine = sched.Serial(), true, true
	// The operations before the goroutines run while the others wait for
	// the budget (see record): no choice there but the first goroutine's,
	// so no step either, unless the budget started goroutines of its own.
	base.Alone = true
	if base.SpinLimit == 0 {
		// A budget's constructor or a call may read a hundred fields in a
		// row; taken for a spin, it would hand the baton round for
		// fairness, every handover a choice. A Gosched still spins at
		// once.
		base.SpinLimit = exhaustSpinLimit
	}
	// The goroutines but the first wait for the budget to be built (see
	// record): each takes its first step, to the wait, and waits, before
	// the first builds it and makes the operations before; no schedule
	// branches before they may go. The budget's own goroutines run with
	// the first meanwhile, in the serial order: the operations before
	// only bring the budget to the edge the scenario explores.
	var start []int
	busy := 0
	for _, l := range s.Goroutines {
		if len(l) > 0 {
			busy++
		}
	}
	if len(s.Clock) > 0 {
		busy++
	}
	for g := 1; g < busy; g++ {
		start = append(start, g, g)
	}
	// One stack of branches for each number of choices that differ from
	// the serial order: the search runs the schedules of fewer first, so
	// that the bug that needs one change of order is found without going
	// through the many schedules that make several free switches.
	stacks := [][]branch{{{base: start, n: len(start), g: -1}}}
	var reuse []sched.Choice
	for {
		i := slices.IndexFunc(stacks, func(s []branch) bool { return len(s) > 0 })
		if i < 0 {
			break
		}
		if limit > 0 && rep.Schedules >= limit {
			rep.Complete = false
			break
		}
		if err := ctx.Err(); err != nil {
			rep.Complete = false
			return rep, err
		}
		b := stacks[i][len(stacks[i])-1]
		stacks[i] = stacks[i][:len(stacks[i])-1]
		o := base
		o.Schedule = b.prefix()
		o.Reuse = reuse
		c := s
		c.Control = &o
		var h model.History
		var r sched.Report
		var err error
		if len(inBubble) > 0 && inBubble[0] != nil {
			err = inBubble[0](func() error {
				var rerr error
				h, r, rerr = recordControlled(ctx, c, newBudget)
				return rerr
			})
		} else {
			h, r, err = recordControlled(ctx, c, newBudget)
		}
		rep.Schedules++
		if err != nil {
			rep.Complete = false
			return rep, err
		}
		if r.Diverged {
			rep.Diverged++
		}
		if visit(h, r) {
			rep.Complete = false
			return rep, nil
		}
		if r.Free || r.Diverged || len(r.Choices) != len(r.Options.Schedule) {
			rep.Complete = false
			continue
		}
		if !rep.Unguarded && slices.ContainsFunc(r.Choices, func(c sched.Choice) bool { return c.Unguarded }) {
			// The branches pushed so far took the critical sections to
			// commute with the other goroutines' steps: start again.
			rep.Unguarded = true
			stacks = [][]branch{{{base: start, n: len(start), g: -1}}}
			continue
		}
		prefix := b.len()
		if b.g < 0 && b.n == len(start) {
			// The first run: no branch before the others may go (see
			// record), though goroutines the budget started (a refill
			// loop, an actor) ran with the first while it built the budget
			// and made the operations before.
			prefix = max(prefix, r.Opened)
		}
		for _, nb := range branches(r.Options.Schedule, r.Choices, prefix, b.sleep, bound, inCalls, rep.Unguarded) {
			nb.dev = b.dev + 1
			for len(stacks) <= nb.dev {
				stacks = append(stacks, nil)
			}
			stacks[nb.dev] = append(stacks[nb.dev], nb)
		}
		// The branches hold none of the run's choices, and visit kept
		// none: the next run records its own in the same table.
		reuse = r.Choices
	}
	return rep, nil
}

// localStep is the sched.Choice.Obj of a step that touches only memory the
// goroutine owns or holds a lock on.
const localStep = 1

// A branch is a prefix still to run, and the sleep set before its last
// choice: goroutines whose step there was explored already, in a sibling or
// the run it branches off, and commutes with the steps taken since.
//
// The prefix is base[:n] followed by g (by nothing when g < 0): the
// branches off one run share its schedule, which is never changed, so that
// the many waiting on the stacks hold a few words each, not a copy.
type branch struct {
	base  []int
	n     int
	g     int
	sleep uint64
	cost  int // the preemptions of the prefix
	dev   int // the choices of the prefix that differ from the serial order
}

// len returns the length of b's prefix.
func (b branch) len() int {
	if b.g < 0 {
		return b.n
	}
	return b.n + 1
}

// prefix returns b's prefix, in a slice of its own.
func (b branch) prefix() []int {
	p := make([]int, b.len())
	copy(p, b.base[:b.n])
	if b.g >= 0 {
		p[b.n] = b.g
	}
	return p
}

// branches returns the prefixes that branch off a run whose schedule
// followed a prefix of length prefix: at each step past it, every goroutine that could have
// run instead, within the bound of preemptions, and not asleep. sleep is
// the sleep set before the prefix's last choice.
//
// Sleep sets (Godefroid, "Partial-Order Methods for the Verification of
// Concurrent Systems", 1996): once the step of goroutine a has been
// explored at a state, a sibling branch that runs b there need not run a
// again until a step that does not commute with a's has been taken, since
// any schedule that did would only reorder a before steps it commutes
// with. Steps commute when they touch different known objects
// (sched.Choice.Obj).
//
// Under a bound of preemptions, a goroutine's next step alone is not
// enough. A schedule that runs a asleep at a later state, and a on
// without a switch, stands for one that runs a's step early and its later
// steps late: a preemption more, which the bound may cut off. So a
// goroutine's step at a state stands for all it does from there until it
// blocks, as far as this run shows it (its footprint): asleep, it stays
// so only while the steps taken commute with every one of them. A Lock of
// a mutex another goroutine holds at that state (sched.Choice.Locks and
// Unlocked tell which) ends the footprint there: run on without a switch,
// the goroutine would wait at it.
//
// A step inside a critical section (local) commutes with every step, since
// memory a mutex guards is touched only under it in code free of data
// races. racy says the code may not be: a run showed a store outside any
// lock (sched.Choice.Unguarded), which may be the racy access to that
// memory (a count decremented without the lock). A local step then
// commutes with none, and the search tries the others' steps at each of
// them.
func branches(order []int, choices []sched.Choice, prefix int, sleep uint64, bound int, inCalls, racy bool) []branch {
	// nextObj[i*gs+g] is g's footprint at state i: what its steps from
	// i on touch, up to the step at which it next blocks.
	n := len(order)
	gs := 1
	for _, g := range order {
		gs = max(gs, g+1)
	}
	sc := scratchPool.Get().(*branchScratch)
	defer scratchPool.Put(sc)
	// ids[i] names step i's object by its order of first appearance in the
	// run, not its address: the footprints' filter then gives the same
	// answers in every run of the same schedule, wherever the objects were
	// allocated (see objBit).
	sc.ids = slices.Grow(sc.ids[:0], len(choices))[:len(choices)]
	ids := sc.ids
	clear(sc.idOf)
	for i := range choices {
		o := choices[i].Obj
		if o > localStep {
			id, ok := sc.idOf[o]
			if !ok {
				id = uintptr(len(sc.idOf)) + localStep + 1
				sc.idOf[o] = id
			}
			o = id
		}
		ids[i] = o
	}
	sc.nextObj = slices.Grow(sc.nextObj[:0], (n+1)*gs)[:(n+1)*gs]
	nextObj := sc.nextObj
	clear(nextObj[n*gs:])
	for i := n - 1; i >= 0; i-- {
		copy(nextObj[i*gs:(i+1)*gs], nextObj[(i+1)*gs:(i+2)*gs])
		f := &nextObj[i*gs+order[i]]
		if choices[i].Blocked {
			*f = footprint{} // it waits after this step: a switch that costs nothing
		}
		*f = f.add(ids[i])
	}
	// last[g] is 1 + the last step before the current one at which g ran;
	// 0 if none. The loop below keeps it as it goes.
	sc.last = slices.Grow(sc.last[:0], gs)[:gs]
	last := sc.last
	clear(last)
	// releasedAt[obj] is 1 + the last step before the current one that
	// released obj (sched.Choice.Releases), unknownAt the same for a
	// release whose object is not known. The loop below keeps them as it
	// goes.
	releasedAt := sc.releasedAt
	clear(releasedAt)
	unknownAt := 0
	// futile reports whether g, run at step i, would only find again that
	// its operation cannot go on: it did at the last step it ran, and no
	// step since released what it waits for (only a release wakes a
	// blocked goroutine, to try again).
	futile := func(i, g int) bool {
		j := -1
		if g < gs {
			j = last[g] - 1
		}
		if j < 0 || !choices[j].Blocked || unknownAt > j+1 {
			return false
		}
		if w := choices[j].Waits; w != nil { // a select of several channels
			for _, o := range w {
				if releasedAt[o] > j+1 {
					return false
				}
			}
			return true
		}
		o := choices[j].Obj
		return o > localStep && releasedAt[o] <= j+1
	}
	// nextOf[i] is the next step after i of the goroutine that took step
	// i, or n if none; firstAt[g] the next step of g at or after the
	// current one, kept by the loop below.
	sc.nextOf = slices.Grow(sc.nextOf[:0], n)[:n]
	nextOf := sc.nextOf
	sc.firstAt = slices.Grow(sc.firstAt[:0], gs)[:gs]
	firstAt := sc.firstAt
	for g := range firstAt {
		firstAt[g] = n
	}
	for i := n - 1; i >= 0; i-- {
		nextOf[i] = firstAt[order[i]]
		firstAt[order[i]] = i
	}
	// holders[obj] is the goroutine that holds the mutex at obj before
	// the current step, as the steps' Locks and Unlocked show; the loop
	// below keeps it.
	holders := sc.holders
	clear(holders)
	// footprintAt is g's footprint at state i, cut at the first Lock of
	// a mutex another goroutine holds there: run from state i without a
	// switch, g would wait at that Lock, and do nothing more until the
	// holder, which cannot run meanwhile, unlocks it. A goroutine on its
	// way to a critical section another is inside then stays asleep while
	// that one takes the steps of its own critical section, inner locks
	// included, which its later steps in this run do touch.
	footprintAt := func(i, g int) footprint {
		f := nextObj[i*gs+g]
		if len(holders) == 0 || !f.steps {
			return f
		}
		var cut footprint
		for k := firstAt[g]; k < n; k = nextOf[k] {
			c := &choices[k]
			cut = cut.add(ids[k])
			if c.Blocked || cut.unknown {
				return f // it waits here anyway, or touches what is not known
			}
			if h, ok := holders[c.Obj]; c.Locks && ok && h != g {
				return cut
			}
		}
		return f
	}
	// wake removes from z the goroutines whose step at state i does not
	// commute with obj.
	wake := func(z uint64, i int, obj uintptr) uint64 {
		for rest := z; rest != 0; rest &= rest - 1 {
			g := bits.TrailingZeros64(rest)
			if g >= gs || !footprintAt(i, g).commutes(obj, racy) {
				z &^= 1 << g
			}
		}
		return z
	}
	var out []branch
	z := uint64(0) // the sleep set of this run's continuation, before step i
	cost := 0
	for i, ch := range choices {
		preempts := func(g int) bool {
			return ch.Held >= 0 && g != ch.Held && !(inCalls && ch.Between) || ch.Spun && g != order[i]
		}
		switch {
		case i == prefix-1:
			z = sleep
		case i >= prefix:
			// The branches at i count as explored before this run's own
			// step there: each sleeps those pushed before it, and this run
			// sleeps them all from i+1 on, while they commute with its
			// steps.
			pushed := uint64(0)
			for alt := ch.Ready &^ ch.Waiting &^ z &^ (1 << order[i]); alt != 0; alt &= alt - 1 {
				g := bits.TrailingZeros64(alt)
				k := cost
				if preempts(g) {
					k++
				}
				if k > bound || futile(i, g) {
					continue
				}
				out = append(out, branch{base: order, n: i, g: g, sleep: z | pushed, cost: k})
				pushed |= 1 << g
			}
			z |= pushed
		}
		if i >= prefix-1 {
			z = wake(z&^(1<<order[i]), i, ids[i])
		}
		if preempts(order[i]) {
			cost++
		}
		last[order[i]] = i + 1
		firstAt[order[i]] = nextOf[i]
		if ch.Locks && !ch.Blocked && ch.Obj > localStep { // a step that also touched another object has none
			holders[ch.Obj] = order[i]
		}
		if ch.Unlocked != 0 {
			delete(holders, ch.Unlocked)
		}
		if ch.Releases {
			if ch.Released == 0 {
				unknownAt = i + 1
			} else {
				releasedAt[ch.Released] = i + 1
			}
		}
	}
	return out
}

// A branchScratch holds the tables branches builds for one run, kept for
// the next: the exhaustive stage calls it once for every schedule it runs.
type branchScratch struct {
	nextObj    []footprint
	last       []int
	releasedAt map[uintptr]int
	nextOf     []int
	firstAt    []int
	holders    map[uintptr]int
	ids        []uintptr
	idOf       map[uintptr]uintptr
}

var scratchPool = sync.Pool{New: func() any {
	return &branchScratch{releasedAt: map[uintptr]int{}, holders: map[uintptr]int{}, idOf: map[uintptr]uintptr{}}
}}

// A footprint is what a goroutine's steps from some state on touch, as far
// as a run shows them: whether one touched what is not known, and a
// one-word Bloom filter of the objects the others touched. A step that
// commutes with a goroutine's next step alone need not commute with the
// steps it takes after that one without a switch; see branches.
type footprint struct {
	steps   bool   // any step at all
	unknown bool   // a step whose object is not known (zero)
	objs    uint64 // a bit per object, by its address's hash
}

// add returns f with a step on obj.
func (f footprint) add(obj uintptr) footprint {
	f.steps = true
	switch obj {
	case 0:
		f.unknown = true
	case localStep:
	default:
		f.objs |= objBit(obj)
	}
	return f
}

// commutes reports whether a step on obj commutes with every step of f;
// racy says that a step inside a critical section may race a step outside
// one. It may say no of steps that commute (two objects of one bit),
// never yes of steps that do not.
func (f footprint) commutes(obj uintptr, racy bool) bool {
	switch {
	case !f.steps || obj == 0:
		return false
	case obj == localStep:
		return !racy
	}
	return !f.unknown && f.objs&objBit(obj) == 0
}

// objBit returns obj's bit in a footprint: obj is a step's object as
// branches names it, by order of first appearance (localStep + 1 on), so
// that the first 62 objects of a run never share a bit.
func objBit(obj uintptr) uint64 {
	return 1 << (obj % 64)
}

package sched

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var (
	// active is the controlled run in progress, nil outside one.
	active atomic.Pointer[run]
	// marked is set by Mark, which every rewritten file calls.
	marked atomic.Bool
	// runMu keeps controlled runs one at a time.
	runMu sync.Mutex
)

// Mark records that instrumented code is linked into the program; every
// rewritten file calls it once, from a package-level variable.
func (hooks) Mark() bool {
	marked.Store(true)
	return true
}

// Instrumented reports whether instrumented code is linked into the
// program: whether a controlled run has yield points to control.
func Instrumented() bool { return marked.Load() }

// A Strategy chooses, at each yield point, which goroutine runs next.
type Strategy struct {
	// Kind is "pct", "walk" or "serial"; "" is "pct".
	Kind string `json:"kind,omitempty"`
	// Depth is PCT's d: d−1 priority-change points. Zero is 3.
	Depth int `json:"depth,omitempty"`
}

// PCT returns the strategy of Burckhardt et al.: each goroutine gets a
// random priority, the runnable goroutine of highest priority runs, and at
// depth−1 points drawn uniformly from the run's length the running
// goroutine's priority drops below every other. A bug that needs depth
// ordering constraints is found with probability at least 1/(n·k^(d−1)),
// for n goroutines and k steps.
func PCT(depth int) Strategy { return Strategy{Kind: "pct", Depth: depth} }

// Walk returns a uniform random walk: at each yield point, any runnable
// goroutine with equal probability.
func Walk() Strategy { return Strategy{Kind: "walk"} }

// Serial returns the strategy that never preempts: the goroutine with the
// baton runs on while it can, and when it blocks or returns, the runnable
// goroutine of lowest index runs. Given after a schedule, it runs the rest
// of the run without another preemption.
func Serial() Strategy { return Strategy{Kind: "serial"} }

func (s Strategy) depth() int {
	if s.Depth <= 0 {
		return 3
	}
	return s.Depth
}

func (s Strategy) String() string {
	if s.Kind == "walk" || s.Kind == "serial" {
		return s.Kind
	}
	return "pct" + strconv.Itoa(s.depth())
}

// Options configure a controlled run.
type Options struct {
	// Seed seeds the strategy's choices.
	Seed uint64 `json:"seed"`
	// Strategy chooses who runs at each yield point.
	Strategy Strategy `json:"strategy"`
	// Length is PCT's estimate of the yield points in a run, over which
	// its change points are spread. Zero is 1000.
	Length int `json:"length,omitempty"`
	// Schedule, if not empty, is followed choice by choice (the goroutine,
	// an index into Run's functions, to run at each yield point); the
	// strategy chooses past its end, or where it names a goroutine that
	// cannot run (the Report then says it diverged).
	Schedule []int `json:"schedule,omitempty"`
	// MaxSteps bounds the yield points of the run, and so the schedule it
	// records: at the yield point past it the run falls back to free
	// running, and the Report says it was Exhausted. Zero is
	// DefaultMaxSteps.
	MaxSteps int `json:"maxSteps,omitempty"`
	// SpinLimit is how many steps in a row without progress make a
	// goroutine spinning (see Spinning in the package documentation);
	// zero is 16. A search that must not take a long stretch of reads for
	// a spin (an exhaustive one) raises it; a Gosched still marks a
	// spinning goroutine at once.
	SpinLimit int `json:"-"`
	// Choices, if set, has the Report keep, for every step, the
	// goroutines the strategy could have chosen and the one that held the
	// baton (Report.Choices): what an exhaustive search needs to branch.
	Choices bool `json:"-"`
	// Trace, if set, has the Report keep, for every step, where the
	// goroutine chosen stood when it last stopped, and the tag it had set
	// with Hook.Tag (Report.Trace): what an explanation of the schedule
	// needs. Each step then costs a stack walk.
	Trace bool `json:"-"`
	// Fine, if set, makes every read and write of a field a yield point,
	// inside a critical section too. Unset, a goroutine that holds a mutex
	// under control reads and writes fields without a switch: in code free
	// of data races only that goroutine can touch what the mutex guards,
	// so a switch there orders nothing that matters, and a budget that
	// does much work under its lock (a recount of its slots) takes few
	// steps. Run sets it once a goroutine under control, inside an
	// operation (see Hook.Tag), has stored into a field while holding no
	// mutex, until ResetFine: such code may race, and a switch inside
	// another goroutine's critical section may matter.
	Fine bool `json:"fine,omitempty"`
	// Stall is how long the goroutine holding the baton may run without
	// reaching a yield point, and how long every goroutine may stay
	// blocked, before the run falls back to free running. Zero is 2 s.
	Stall time.Duration `json:"-"`
	// Alone, if set, makes the yield points of a goroutine inside
	// Hook.Alone no steps while no other goroutine could be chosen there:
	// every other one has returned, is blocked or waits at a gate (AwaitClose). The
	// run then records nothing for them, and the goroutine goes on: a
	// search replays such a stretch (the operations that bring a budget
	// to an edge, before the concurrent part) at the cost of plain calls.
	// It also makes Hook.Settle give way to the others.
	Alone bool `json:"alone,omitempty"`
	// Reuse, with Choices, is storage the run may record its choices in:
	// the Report.Choices of a run before, which its caller no longer
	// reads. A search that runs thousands of schedules then allocates a
	// table once, not once a run. The Report's Options have none.
	Reuse []Choice `json:"-"`
}

// DefaultMaxSteps is the step bound of a run whose Options.MaxSteps is
// zero.
const DefaultMaxSteps = 1_000_000

// String formats o as ParseOptions reads it:
// "pct3,seed=7,length=1200,maxsteps=5000,schedule=0*12/1*3/0*4".
func (o Options) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s,seed=%d", o.Strategy, o.Seed)
	if o.Length > 0 {
		fmt.Fprintf(&b, ",length=%d", o.Length)
	}
	if o.MaxSteps > 0 {
		fmt.Fprintf(&b, ",maxsteps=%d", o.MaxSteps)
	}
	if o.Alone {
		b.WriteString(",alone=1")
	}
	if len(o.Schedule) > 0 {
		b.WriteString(",schedule=")
		b.WriteString(formatSchedule(o.Schedule))
	}
	return b.String()
}

// formatSchedule writes s as runs: "0*12/1*3" is goroutine 0 twelve times,
// then goroutine 1 three times.
func formatSchedule(s []int) string {
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] == s[i] {
			j++
		}
		parts = append(parts, fmt.Sprintf("%d*%d", s[i], j-i))
		i = j
	}
	return strings.Join(parts, "/")
}

// ErrOptions is wrapped by every error of ParseOptions.
var ErrOptions = errors.New("yield: bad options")

// ParseOptions reads the form Options.String writes.
func ParseOptions(s string) (Options, error) {
	var o Options
	bad := func(format string, a ...any) (Options, error) {
		return Options{}, fmt.Errorf("%w %q: %s", ErrOptions, s, fmt.Sprintf(format, a...))
	}
	fields := strings.Split(s, ",")
	switch st := fields[0]; {
	case st == "walk":
		o.Strategy = Walk()
	case st == "serial":
		o.Strategy = Serial()
	case strings.HasPrefix(st, "pct"):
		d, err := strconv.Atoi(st[3:])
		if err != nil || d < 1 || d > 64 {
			return bad("the strategy %q is not pct1 to pct64", st)
		}
		o.Strategy = PCT(d)
	default:
		return bad("the strategy %q is not walk, serial nor pctN", st)
	}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return bad("%q is not key=value", f)
		}
		switch k {
		case "seed":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return bad("seed %q: %v", v, err)
			}
			o.Seed = n
		case "length":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return bad("length %q is not a count", v)
			}
			o.Length = n
		case "maxsteps":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return bad("maxsteps %q is not a count", v)
			}
			o.MaxSteps = n
		case "alone":
			if v != "1" {
				return bad("alone %q is not 1", v)
			}
			o.Alone = true
		case "schedule":
			for _, run := range strings.Split(v, "/") {
				g, c, ok := strings.Cut(run, "*")
				gi, err1 := strconv.Atoi(g)
				ci, err2 := strconv.Atoi(c)
				if !ok || err1 != nil || err2 != nil || gi < 0 || gi >= maxGoroutines || ci < 1 || ci > 1<<24 {
					return bad("schedule run %q is not goroutine*count", run)
				}
				o.Schedule = append(o.Schedule, slices.Repeat([]int{gi}, ci)...)
			}
		default:
			return bad("unknown key %q", k)
		}
	}
	return o, nil
}

// maxGoroutines is the most functions Run takes.
const maxGoroutines = 64

// A Report says what a controlled run did.
type Report struct {
	// Options are the run's, with Schedule holding every choice made: give
	// them back to Run to replay it.
	Options Options `json:"options"`
	// Free is set if the run fell back to free running, and Reason says
	// why; the choices before it are in the schedule.
	Free   bool   `json:"free,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Exhausted is set, with Free, if the run reached its step bound
	// (Options.MaxSteps): a goroutine spun, or the run did not end. Run
	// then returns once the functions have returned, or after
	// Options.Stall of free running, whichever is first.
	Exhausted bool `json:"exhausted,omitempty"`
	// Diverged is set if a schedule given to replay named a goroutine that
	// could not run at some point: the code did not do the same thing.
	Diverged bool `json:"diverged,omitempty"`
	// Polls counts the times every goroutine under control was blocked,
	// one of them on something a select cannot wait for (a lock), and the
	// run slept before trying them again, in case one outside control had
	// released them (see handOff): each sleep takes about a millisecond on
	// a busy machine. Waits on channels, which the run watches, are not
	// counted.
	Polls int `json:"polls,omitempty"`
	// Preemptions holds the steps of the schedule at which the goroutine
	// that had the baton could have gone on but another was chosen; a
	// goroutine that is spinning (see Spinning in the package
	// documentation) and is passed over is not preempted.
	Preemptions []int `json:"preemptions,omitempty"`
	// Choices, kept when Options.Choices is set, holds a Choice for every
	// step of the schedule.
	Choices []Choice `json:"-"`
	// Opened is how many steps the schedule held when a gate (see
	// AwaitClose) first opened: the goroutines waiting at it could be
	// chosen from that step on. Zero if none opened.
	Opened int `json:"-"`
	// Trace, kept when Options.Trace is set, holds a Step for every step
	// of the schedule.
	Trace []Step `json:"-"`
}

// A Step is one step of a traced run (Options.Trace): G, the goroutine
// chosen (an index into Run's functions); Site, where it stood when it
// stopped at its last yield point, so where the step resumes it (nil at
// its first step, which starts its function); and Tag, what it last gave
// Hook.Tag before that.
type Step struct {
	G    int
	Tag  int64
	Site Site
}

// A Site is a goroutine's stack at a yield point: the program counters
// of its calls, innermost first, as runtime.Callers gives them, the
// scheduler's own frames included. runtime.CallersFrames reads them; in
// rewritten code the /*line*/ directives make the lines the original
// file's.
type Site []uintptr

// A Choice is what the scheduler could choose at one step: Ready, a set of
// goroutines by index (bit i for Run's function i), any of which a replay
// may name there, and Held, the goroutine that held the baton and could
// have gone on (−1 if none could: it blocked, returned or was spinning).
// Naming another than Held at that step is a preemption. Between is set
// when Held stood between two of a harness's operations (see
// Hook.Between): a search may count a switch there as free.
//
// Obj names what the step taken touched, for an exhaustive search's
// partial-order reduction: the address of the atomic variable of an
// operation through [P], or of the mutex of a Lock or RLock; 1 for a step
// that touches only memory a mutex the goroutine holds guards (a [P] of a
// field's value, a Hook.Point, inside a critical section); zero when it is
// not known (a field read or a Point outside one, any
// other yield point, a Hook.Boundary, and a step that unlocked a mutex), which
// is to be taken as touching everything. Two steps commute when neither
// object is zero and they differ or one is 1, as long as the code between
// yield points shares no memory without synchronization; a store that
// may break that is marked (Unguarded).
//
// Spun is set when the goroutine that held the baton could have gone on
// but was passed over as spinning: the scheduler's choice there is forced
// by fairness, and a search that chooses otherwise preempts.
//
// Locks is set when the step taken tries to Lock the mutex Obj (an
// exclusive lock: a Mutex's, an RWMutex's Lock); it holds the mutex after
// the step unless the step Blocked, or unlocked it again (Unlocked). Unlocked
// is the mutex the step unlocked, if it unlocked one; with Locks, a search
// can tell which mutexes are held at each step, and that a goroutine that
// would Lock one held by another would wait there.
//
// Waiting holds the goroutines of Ready whose step there would be a Lock
// of a mutex another goroutine holds, or a receive, in AwaitClose, from a
// channel Close has not closed yet: chosen, each would only find it so
// and wait, so a search need not choose it.
type Choice struct {
	Ready   uint64
	Held    int
	Obj     uintptr
	Spun    bool
	Waiting uint64
	// Blocked is set when the goroutine chosen found that its operation
	// (a Lock, a channel operation) could not go on, and waited: the step
	// changed nothing.
	Blocked bool
	// Unguarded is set when the step is a store into a field (see [W]),
	// inside an operation (see Hook.Tag), by a goroutine that holds no
	// mutex: the code may not be free of data races (or the field is the
	// goroutine's own), and memory a mutex guards may be written without
	// it.
	Unguarded bool
	Between   bool
	Locks     bool
	Unlocked  uintptr
	// Releases is set when the step ended with an operation that may let
	// a blocked goroutine go on (an unlock, a channel operation that
	// completed, a close): Released is its object, zero if not known.
	// Only such a step wakes a blocked goroutine. Waits holds, for a
	// step that Blocked in a select of several cases, the channels it
	// waits on (its Obj is zero: it read them all).
	Releases bool
	Released uintptr
	Waits    []uintptr
}

// String describes the run in a line, with the options to replay it.
func (r Report) String() string {
	s := fmt.Sprintf("%d yield points, %d preemptions, schedule %s", len(r.Options.Schedule), len(r.Preemptions), r.Options)
	if r.Diverged {
		s += " (diverged from the schedule given)"
	}
	if r.Free {
		s += "; fell back to free running: " + r.Reason
	}
	return s
}

type state uint8

const (
	runnable state = iota
	blocked
	done
)

// gor is a goroutine under control.
type gor struct {
	id    int
	baton chan struct{} // the right to run, handed over by whoever held it
	st    state
	prio  int
	child bool    // started by Go during the run
	g     uintptr // the goroutine's identity, curG
	w     *waiter // while it waits in a channel operation

	// What tells a spinning goroutine (see spin.go). mark, cell and
	// before are only touched by the goroutine itself; epoch, quiet and
	// last under run.mu.
	mark   mark
	cell   any       // with markWatch, the atomic variable of g's step
	before cellValue // and its value when the step began
	epoch  uint64    // the run's epoch when quiet was last reset
	quiet  int       // g's steps without progress since then
	last   int       // 1 + the step at which g was last chosen; 0 if never

	// With Options.Choices: the object of the operation g waits to make
	// at its yield point (see Choice.Obj), and whether its current step
	// did something with effects beyond it (an unlock, its return).
	pending uintptr
	locking bool    // pending is a mutex g waits to Lock
	store   bool    // the step g waits to take is an unguarded store (see Choice.Unguarded)
	touched uintptr // an object the current step touched besides its own: a mutex it unlocked, a channel it closed
	gate    uintptr // a channel g waits to see closed by Close (see AwaitClose); under r.mu
	// settling: g, in Hook.Settle, gives way to the others that can run;
	// under r.mu.
	settling bool
	// passing: g, at a select whose default it may take, passed the
	// baton to let the others run; it is blocked only until none of them
	// can. Under r.mu.
	passing bool
	locks   int  // the mutexes g holds, locked exclusively under control (see Options.Fine)
	opaque  bool // the current step touched touched, or something unknown when touched is zero

	// With Options.Trace: where g last stopped. With Options.Trace or
	// Options.Choices: its tag (see Tag).
	site Site
	tag  int64
	// between: g stands between two operations (see Hook.Between).
	between bool
}

type run struct {
	gs   []*gor
	opt  Options
	free atomic.Bool
	// release is closed when the run falls back to free running.
	release chan struct{}
	// ticks counts yield points, for the watchdog.
	ticks atomic.Uint64
	// outside counts the goroutines inside Outside.
	outside atomic.Int32
	// cur is the goroutine holding the baton, the only one under control
	// that runs; nil while none does.
	cur atomic.Pointer[gor]

	// initial is the number of Run's functions, and left the number of
	// them that have not returned.
	initial, left int
	// maxSteps is Options.MaxSteps, or its default; spinLimit
	// Options.SpinLimit, or spinLimit.
	maxSteps, spinLimit int
	// alone is the goroutine inside Hook.Alone, with Options.Alone, and
	// aloneSteps counts the yield points it passed that were no steps
	// (see aloneLocked); under mu.
	alone      *gor
	aloneSteps int

	mu  sync.Mutex
	rng *rand.Rand
	// selRng orders the cases a select tries. It is apart from rng, which
	// a replay does not draw from at the choices it is given.
	selRng *rand.Rand
	// onces holds the Onces whose Do a goroutine under control is in.
	onces     map[*sync.Once]*gor
	waiters   []*waiter // in the order they began to wait
	changes   []int     // PCT's change points, in steps
	low       int       // the priority the next change point gives
	schedule  []uint8   // the choices, goroutine ids below maxGoroutines
	preempted []int     // the steps of schedule that preempted a runnable goroutine
	choices   []Choice  // with Options.Choices, the candidates of every step
	trace     []Step    // with Options.Trace, where each step resumed
	diverged  bool
	reason    string
	exhausted bool      // the fallback was for the step bound
	opened    int       // see Report.Opened
	blockedAt time.Time // when every goroutine was last seen blocked
	polls     int       // see Report.Polls
	// epoch counts the steps that made progress (see spin.go).
	epoch uint64
	// ready is pickLocked's buffer.
	ready []*gor
	// holders holds the goroutine holding each mutex locked under
	// control (exclusively), by address.
	holders map[uintptr]*gor
}

// Run runs fs as goroutines, one at a time, choosing who runs at each yield
// point by opt, and returns when all have returned, or, if the run reached
// its step bound, after Options.Stall of free running. A panic or
// runtime.Goexit in one of them ends that goroutine as usual (Run's caller
// must recover it inside the function). Only one controlled run happens at
// a time; a second Run waits until the first's control ends: when all its
// functions have returned, or when it falls back to free running, as it
// does at the latest at its step bound. Run panics if given more than 64
// functions.
//
// The goroutines a run leaves behind, running freely (those its code
// started and that have not returned, or all of them after a fallback),
// never join a later run: their hooks pass straight through and do not
// wake that run's goroutines.
func Run(opt Options, fs ...func()) Report {
	if len(fs) > maxGoroutines {
		panic(fmt.Sprintf("yield: Run of %d functions, at most %d", len(fs), maxGoroutines))
	}
	if opt.Stall <= 0 {
		opt.Stall = 2 * time.Second
	}
	if opt.Length <= 0 {
		opt.Length = 1000
	}
	if unguarded.Load() {
		opt.Fine = true
	}
	runMu.Lock()
	r := newRun(opt, len(fs))
	if len(fs) == 0 {
		runMu.Unlock()
		return r.report()
	}
	active.Store(r)
	var wg, registered sync.WaitGroup
	registered.Add(len(fs))
	for i, f := range fs {
		gi := r.gs[i]
		wg.Go(func() { r.enter(gi, &registered, f) })
	}
	registered.Wait()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		r.watch()
	}()
	r.mu.Lock()
	r.handTo(r.pickLocked(nil))
	r.mu.Unlock()
	// Control ends when the last function returns or at a fallback, which
	// both close release; what is left of the run then runs freely, and
	// the next run may start.
	<-r.release
	active.CompareAndSwap(r, nil)
	<-watched
	runMu.Unlock()
	if r.wasExhausted() {
		returned := make(chan struct{})
		go func() {
			wg.Wait()
			close(returned)
		}()
		t := time.NewTimer(opt.Stall)
		defer t.Stop()
		select {
		case <-returned:
		case <-t.C:
		}
	} else {
		wg.Wait()
	}
	return r.report()
}

// enter runs f as g, once it holds the baton.
//
//go:noinline
func (r *run) enter(g *gor, registered *sync.WaitGroup, f func()) {
	r.identify(g)
	registered.Done()
	r.await(g)
	g.mark = markProgress
	defer r.exit(g)
	f()
}

// identify records the calling goroutine as g's; if the run has already
// fallen back, it is left behind at once.
func (r *run) identify(g *gor) {
	r.mu.Lock()
	g.g = curG()
	if r.free.Load() {
		leftovers.add(g.g)
	}
	r.mu.Unlock()
}

func (r *run) wasExhausted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exhausted
}

func newRun(opt Options, n int) *run {
	r := &run{
		opt:      opt,
		release:  make(chan struct{}),
		rng:      rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15)),
		selRng:   rand.New(rand.NewPCG(opt.Seed, 0x2545f4914f6cdd1d)),
		onces:    map[*sync.Once]*gor{},
		initial:  n,
		left:     n,
		maxSteps: opt.MaxSteps,
	}
	if r.maxSteps <= 0 {
		r.maxSteps = DefaultMaxSteps
	}
	if opt.Choices {
		// A search replays a prefix of a run like the last: room for one
		// as long, with some to spare.
		steps := len(opt.Schedule) + 64
		r.schedule, r.choices = make([]uint8, 0, steps), opt.Reuse[:0]
		if cap(r.choices) < steps {
			r.choices = make([]Choice, 0, max(steps, 2*cap(r.choices)))
		}
	}
	r.spinLimit = opt.SpinLimit
	if r.spinLimit <= 0 {
		r.spinLimit = spinLimit
	}
	d := opt.Strategy.depth()
	prios := r.rng.Perm(n)
	for i := range n {
		// A goroutine's first step runs its own code up to its first yield
		// point.
		r.gs = append(r.gs, &gor{id: i, baton: make(chan struct{}, 1), prio: d + prios[i]*prioritySpread + prioritySpread/2, pending: localObject})
	}
	if opt.Strategy.Kind != "walk" && opt.Strategy.Kind != "serial" {
		for range d - 1 {
			r.changes = append(r.changes, 1+r.rng.IntN(opt.Length))
		}
		slices.Sort(r.changes)
	}
	r.low = d - 1
	return r
}

// report describes r. The run is over, and control with it: what it kept
// is handed over without a copy.
func (r *run) report() Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.opt
	o.Reuse = nil
	o.Schedule = make([]int, len(r.schedule))
	for i, g := range r.schedule {
		o.Schedule[i] = int(g)
	}
	return Report{Options: o, Free: r.reason != "", Reason: r.reason, Exhausted: r.exhausted, Diverged: r.diverged, Polls: r.polls, Preemptions: slices.Clone(r.preempted), Choices: r.choices, Trace: r.trace, Opened: r.opened}
}

// self returns the calling goroutine if it is the one under control that
// holds the baton, else nil: a goroutine under control that does not hold
// it is waiting in await, so a hook called by anything but the baton's
// holder is called by a goroutine that runs freely.
func (r *run) self() *gor {
	if cur := r.cur.Load(); cur != nil && cur.g == curG() {
		return cur
	}
	return nil
}

// point is a yield point; obj is the object of the step it begins, kept
// with Options.Choices.
func (r *run) point(obj uintptr) {
	if r.free.Load() {
		return
	}
	if g := r.self(); g != nil {
		if r.opt.Choices {
			g.pending = obj
		}
		r.yield(g)
	}
}

// yield lets the strategy choose who runs next, g included.
func (r *run) yield(g *gor) {
	r.ticks.Add(1)
	r.mu.Lock()
	r.blockedAt = time.Time{}
	if r.alone == g && r.aloneLocked(g) {
		r.mu.Unlock()
		return
	}
	r.handOff(g)
}

// aloneLocked reports whether g, inside Hook.Alone, passes its yield point
// without a step: no other goroutine could be chosen there (each has
// returned, is blocked, or waits at a gate), and the step bound is not
// reached, for yield points passed so count towards it. The step g took before the
// stretch is taken to touch what is not known. Called with r.mu held.
func (r *run) aloneLocked(g *gor) bool {
	if r.free.Load() || len(r.schedule)+r.aloneSteps >= r.maxSteps {
		return false
	}
	for _, o := range r.gs {
		if o != g && o.st == runnable && o.gate == 0 {
			return false
		}
	}
	r.aloneSteps++
	if r.opt.Choices && g.last > 0 && g.last <= len(r.choices) {
		// The step before the stretch takes it in: what it locks and
		// unlocks there is not told (no holder is taken from it).
		r.choices[g.last-1].Locks = false
	}
	g.mark, g.cell = markNone, nil
	if r.opt.Choices {
		g.pending, g.locking, g.store = 0, false, false
		g.opaque, g.touched = true, 0
	}
	return true
}

// acquireAs is a blocking operation of g, the goroutine under control
// calling it: try until it succeeds, passing the baton while it cannot;
// block is the operation itself, after a fallback.
func (r *run) acquireAs(g *gor, try func() bool, block func()) {
	r.acquireObj(g, 0, false, try, block)
}

// acquireObj is acquireAs of the lock at obj (zero: not known), an
// exclusive one (a Lock, not an RLock) when exclusive is set.
func (r *run) acquireObj(g *gor, obj uintptr, exclusive bool, try func() bool, block func()) {
	if r.opt.Choices {
		g.pending, g.locking = obj, exclusive && obj != 0
	}
	r.yield(g)
	for !try() {
		if r.free.Load() {
			block()
			return
		}
		g.mark = markQuiet
		r.mu.Lock()
		g.st = blocked
		r.markBlocked(g)
		if r.opt.Choices {
			g.pending, g.locking = obj, exclusive && obj != 0 // its next step tries again
		}
		r.handOff(g)
	}
	r.ticks.Add(1)
	r.mu.Lock()
	r.blockedAt = time.Time{}
	if exclusive && obj != 0 {
		if r.holders == nil {
			r.holders = map[uintptr]*gor{}
		}
		r.holders[obj] = g
		g.locks++
	}
	r.mu.Unlock()
}

// markBlocked records, with Options.Choices, that g's step found its
// operation could not go on. Called with r.mu held.
func (r *run) markBlocked(g *gor) {
	if r.opt.Choices && g.last > 0 && g.last <= len(r.choices) {
		r.choices[g.last-1].Blocked = true
	}
}

// unlocked records, with Options.Choices, that the mutex at obj was
// unlocked.
func (r *run) unlocked(obj uintptr) {
	self := r.self()
	r.mu.Lock()
	if h := r.holders[obj]; h != nil {
		h.locks--
		delete(r.holders, obj)
	}
	if r.opt.Choices && self != nil && self.last > 0 && self.last <= len(r.choices) {
		r.choices[self.last-1].Unlocked = obj
	}
	r.mu.Unlock()
}

// released wakes every blocked goroutine after an operation that may let
// one of them go on (an unlock, a completed channel operation), then, for
// a goroutine under control, yields. A goroutine left behind by an
// earlier run wakes none.
func (r *run) released() { r.releasedObj(0) }

// releasedObj is released after an operation on obj (zero: not known):
// with Options.Choices, the step that ends here touched obj, and the code
// after it, up to the next yield point, is the goroutine's own.
func (r *run) releasedObj(obj uintptr) {
	if r.free.Load() {
		return
	}
	self := r.self()
	if self == nil && leftovers.has() {
		return
	}
	r.mu.Lock()
	if r.opt.Choices && self != nil && self.last > 0 && self.last <= len(r.choices) {
		c := &r.choices[self.last-1]
		if c.Releases && c.Released != obj {
			c.Released = 0 // a step that took in a stretch of Alone released several
		} else {
			c.Releases, c.Released = true, obj
		}
	}
	for _, g := range r.gs {
		if g.st == blocked {
			g.st = runnable
		}
		if g.gate == obj {
			g.gate = 0
			if r.opened == 0 {
				r.opened = len(r.schedule)
			}
		}
	}
	r.mu.Unlock()
	if self != nil {
		if r.opt.Choices {
			// The code after the operation is the next step's: it reads,
			// and any write of a field it makes outside a critical section
			// is a Point of its own.
			self.opaque, self.touched, self.pending = true, obj, localObject
		}
		r.yield(self)
	}
}

// exit hands the baton on from a goroutine that has returned.
// Once every function of Run has returned, the goroutines Go started run
// freely.
func (r *run) exit(g *gor) {
	r.mu.Lock()
	g.st = done
	if !g.child {
		r.left--
	}
	if r.free.Load() {
		leftovers.remove(g.g) // it was left behind at the fallback
		r.mu.Unlock()
		return
	}
	r.epoch++ // a goroutine that returns makes progress
	if r.left == 0 {
		r.fallbackLocked("")
		r.mu.Unlock()
		return
	}
	r.handOff(g)
}

// await waits until g holds the baton, or the run is free.
func (r *run) await(g *gor) {
	select {
	case <-g.baton:
	case <-r.release:
	}
}

// handTo gives the baton to g. Called with r.mu held.
func (r *run) handTo(g *gor) {
	if g != nil {
		g.baton <- struct{}{}
	}
}

// handOff passes the baton from g, whose state is set, to the goroutine
// the strategy picks, and unless g is done waits until it is g's again.
// Called with r.mu held; returns with it released. When every goroutine
// left is blocked it polls them, since a goroutine not under control may
// release them; after Options.Stall of that, the run falls back.
func (r *run) handOff(g *gor) {
	defer func() { g.mark = markProgress }() // what g does next is not known
	if r.opt.Trace && g.st != done {
		pcs := make([]uintptr, maxSite)
		g.site = pcs[:runtime.Callers(2, pcs)]
	}
	for {
		next := r.pickLocked(g)
		if next == g {
			r.mu.Unlock()
			return
		}
		if next != nil {
			r.handTo(next)
			wait := g.st != done
			r.mu.Unlock()
			if wait {
				r.await(g)
			}
			return
		}
		if !slices.ContainsFunc(r.gs, func(g *gor) bool { return g.st != done }) || r.free.Load() {
			r.mu.Unlock()
			return
		}
		if r.resumePassing() {
			continue
		}
		now := time.Now()
		if r.blockedAt.IsZero() {
			r.blockedAt = now
		} else if now.Sub(r.blockedAt) > r.opt.Stall {
			r.fallbackLocked(stalled(r.opt.Stall))
			r.mu.Unlock()
			return
		}
		if r.awaitOutside(r.opt.Stall - now.Sub(r.blockedAt)) {
			continue
		}
		r.polls++
		r.mu.Unlock()
		time.Sleep(20 * time.Microsecond)
		r.mu.Lock()
		for _, b := range r.gs {
			if b.st == blocked {
				b.st = runnable
			}
		}
	}
}

// resumePassing makes runnable again the goroutines that passed the baton
// at a select with a default case (see choose1), once every goroutine
// that can run has run and blocked: such a goroutine can go on at once,
// so the run has no cause to wait in real time for the blocked ones, as
// it does when none can (a goroutine outside control may release them).
// A goroutine that passed inside a critical section, where the others wait
// for its lock, so no longer costs the run a poll. It reports whether any
// was. Called with r.mu held.
func (r *run) resumePassing() bool {
	resumed := false
	for _, g := range r.gs {
		if g.passing && g.st == blocked {
			g.passing, g.st = false, runnable
			resumed = true
		}
	}
	return resumed
}

// maxSite bounds the frames a traced step keeps.
const maxSite = 48

func stalled(d time.Duration) string {
	return fmt.Sprintf("every goroutine under control stayed blocked for %v (a deadlock, or a wait for code that is not instrumented)", d)
}

// awaitOutside waits, when every blocked goroutine waits in a channel
// operation, until one of those operations completes (a timer fires, a
// goroutine outside control sends or closes, a context is cancelled) and
// completes it, or until the run falls back, or for at most d; it returns
// false, at once, when a blocked goroutine waits for something else (a
// mutex), which only polling sees. Called with r.mu held; returns with it
// held. Inside a testing/synctest bubble the wait is durable, so the
// bubble's clock moves straight to the next timer, as it would without
// control.
func (r *run) awaitOutside(d time.Duration) bool {
	var ws []*waiter
	for _, g := range r.gs {
		if g.st == blocked {
			if g.w == nil || g.w.done {
				return false
			}
			ws = append(ws, g.w)
		}
	}
	if len(ws) == 0 {
		return false
	}
	type origin struct {
		w *waiter
		i int
	}
	var cases []reflect.SelectCase
	var from []origin
	for _, w := range ws {
		for i, c := range w.cases {
			if p, _ := c.channel(); p != nil {
				cases = append(cases, c.reflectCase())
				from = append(from, origin{w, i})
			}
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(r.release)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)})
	r.mu.Unlock()
	k, v, ok := reflect.Select(cases)
	r.mu.Lock()
	switch k {
	case len(from): // released
		return true
	case len(from) + 1:
		r.fallbackLocked(stalled(r.opt.Stall))
		return true
	}
	o := from[k]
	o.w.cases[o.i].received(v, ok)
	o.w.chosen, o.w.done = o.i, true
	r.waiters = slices.DeleteFunc(r.waiters, func(x *waiter) bool { return x == o.w })
	r.blockedAt = time.Time{}
	r.ticks.Add(1)
	r.epoch++
	for _, g := range r.gs {
		if g.st == blocked {
			g.st = runnable
		}
	}
	return true
}

// pickLocked chooses the goroutine to run at the next yield point, from
// the runnable ones, and records the choice; nil if none can run, or if
// the run is free or has reached its step bound (it then falls back).
// from is the goroutine giving up the baton (nil at the start), and the
// caller: its step, which ends here, is settled first.
//
// A goroutine that is spinning (see spin.go) is passed over while another
// that is not can run. When every goroutine that can run is spinning, the
// blocked ones are candidates too (a goroutine outside control may have
// released them; the one chosen tries again), and the least recently
// chosen runs, so that each gets its turn.
func (r *run) pickLocked(from *gor) *gor {
	if r.free.Load() {
		return nil
	}
	if from != nil {
		r.settle(from)
	}
	step := len(r.schedule)
	if step+r.aloneSteps >= r.maxSteps {
		r.exhausted = true
		where := ""
		if from != nil {
			where = fmt.Sprintf(" (goroutine %d at %s)", from.id+1, callerOutside())
		}
		r.fallbackLocked(fmt.Sprintf("step bound of %d exceeded%s: the rest of the run is free", r.maxSteps, where))
		return nil
	}
	ready := r.ready[:0]
	fair := true
	for _, g := range r.gs {
		if g.st == runnable {
			ready = append(ready, g)
			fair = fair && r.spinning(g)
		}
	}
	if len(ready) == 0 {
		// Nobody holds the baton: a goroutine that returned may have
		// left it, and its identity may be given to a new one.
		r.cur.Store(nil)
		return nil
	}
	woken := uint64(0) // by index in gs
	if fair {
		ready = ready[:0]
		for i, g := range r.gs {
			if g.st == blocked {
				g.st = runnable
				woken |= 1 << i
			}
			if g.st == runnable {
				ready = append(ready, g)
			}
		}
	} else {
		ready = slices.DeleteFunc(ready, r.spinning)
	}
	r.ready = ready
	var next *gor
	if step < len(r.opt.Schedule) {
		if want := r.opt.Schedule[step]; want >= 0 && want < len(r.gs) && r.gs[want].st == runnable {
			next = r.gs[want]
		} else {
			r.diverged = true
		}
	}
	if next == nil && from != nil && from.settling {
		// Hook.Settle: another that can run and is not at a gate first.
		if i := slices.IndexFunc(ready, func(g *gor) bool { return g != from && g.gate == 0 }); i >= 0 {
			next = ready[i]
		}
	}
	if next == nil {
		next = r.choose(from, ready, step, fair)
	}
	for i, g := range r.gs {
		if woken&(1<<i) != 0 && g != next {
			g.st = blocked // woken only to be a candidate
		}
	}
	if r.opt.Choices && from != nil && from.opaque {
		from.opaque = false
		if from.last > 0 && from.last <= len(r.choices) {
			// One object only: the step's own if it touched no other of
			// note, the one it touched if its own was local, else unknown.
			c := &r.choices[from.last-1]
			switch {
			case from.touched == 0:
				c.Obj = 0
			case c.Obj == localObject:
				c.Obj = from.touched
			case c.Obj != from.touched:
				c.Obj = 0
			}
		}
		from.touched = 0
	}
	held := from != nil && from.st == runnable && !r.spinning(from) && !from.settling
	if held && from != next {
		r.preempted = append(r.preempted, step)
	}
	if r.opt.Choices {
		c := Choice{Held: -1}
		for _, g := range ready {
			c.Ready |= 1 << g.id
		}
		if held && c.Ready&(1<<from.id) != 0 {
			c.Held, c.Between = from.id, from.between
		}
		c.Spun = from != nil && from.st == runnable && r.spinning(from)
		for _, g := range ready {
			if h := r.holders[g.pending]; g.locking && h != nil && h != g || g.gate != 0 {
				c.Waiting |= 1 << g.id
			}
		}
		c.Obj, c.Unguarded, c.Locks = next.pending, next.store, next.locking
		next.pending, next.locking, next.store = 0, false, false
		r.choices = append(r.choices, c)
	}
	if r.opt.Trace {
		r.trace = append(r.trace, Step{G: next.id, Tag: next.tag, Site: next.site})
	}
	r.schedule = append(r.schedule, uint8(next.id))
	next.last = step + 1
	r.cur.Store(next)
	clear(ready) // hold no goroutine
	return next
}

// choose applies the strategy to ready, the goroutines that may run; fair
// says they all spin, and the least recently chosen runs.
func (r *run) choose(from *gor, ready []*gor, step int, fair bool) *gor {
	if r.opt.Strategy.Kind != "walk" && r.opt.Strategy.Kind != "serial" {
		for len(r.changes) > 0 && r.changes[0] <= step {
			r.changes = r.changes[1:]
			if from != nil {
				from.prio = r.low
				r.low--
			}
		}
	}
	if fair {
		first := ready[0]
		for _, g := range ready[1:] {
			if g.last < first.last {
				first = g
			}
		}
		return first
	}
	switch r.opt.Strategy.Kind {
	case "walk":
		return ready[r.rng.IntN(len(ready))]
	case "serial":
		if slices.Contains(ready, from) {
			return from
		}
		return ready[0]
	}
	best := ready[0]
	for _, g := range ready[1:] {
		if g.prio > best.prio {
			best = g
		}
	}
	return best
}

// fallbackLocked releases every goroutine to run freely, and leaves
// behind those that have not returned; reason is empty when the run is
// over. Called with r.mu held.
func (r *run) fallbackLocked(reason string) {
	if r.free.CompareAndSwap(false, true) {
		r.reason = reason
		r.cur.Store(nil)
		for _, g := range r.gs {
			if g.st != done && g.g != 0 {
				leftovers.add(g.g)
			}
		}
		close(r.release)
	}
}

// watch falls back to free running if the goroutine holding the baton
// reaches no yield point for Options.Stall: it is blocked outside
// instrumented code, or computing for that long. It returns when the run
// is free.
func (r *run) watch() {
	last := r.ticks.Load()
	t := time.NewTicker(r.opt.Stall / 4)
	defer t.Stop()
	idle := 0
	for {
		select {
		case <-r.release:
			return
		case <-t.C:
		}
		// Progress is a yield point passed or a blocking operation
		// completed. Goroutines that are only woken and blocked again, by
		// a goroutine outside control that keeps releasing them, make
		// none, and neither does a run that only polls.
		now := r.ticks.Load()
		if now != last || r.outside.Load() > 0 {
			last, idle = now, 0
			continue
		}
		if idle++; idle >= 4 {
			r.mu.Lock()
			r.fallbackLocked(fmt.Sprintf("no goroutine under control made progress for %v (one blocked outside instrumented code: the network, a syscall, a lock that is not rewritten; or all waited on one)", r.opt.Stall))
			r.mu.Unlock()
			return
		}
	}
}

// Outside runs f, which may block outside instrumented code on purpose
// (a sleep on the fake clock of a testing/synctest bubble), without the
// run falling back to free running for it. Other goroutines under control
// do not run meanwhile. Called by a goroutine left behind by an earlier
// run, it is f().
func (hooks) Outside(f func()) {
	r := active.Load()
	if r == nil || r.self() == nil && leftovers.has() {
		f()
		return
	}
	r.outside.Add(1)
	defer r.outside.Add(-1)
	f()
}

// callerOutside names the innermost frame of the calling goroutine that is
// not the scheduler's, its hooks' or the runtime's: where the code under
// control stood. "unknown" if none is.
func callerOutside() string {
	pcs := make([]uintptr, maxSite)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		fn := f.Function
		if !strings.Contains(fn, "/internal/sched.") && !strings.Contains(fn, "/yield.") &&
			!strings.HasPrefix(fn, "runtime.") && !strings.HasPrefix(fn, "sync.") && fn != "" {
			return fmt.Sprintf("%s:%d in %s", filepath.Base(f.File), f.Line, fn[strings.LastIndex(fn, "/")+1:])
		}
		if !more {
			return "unknown"
		}
	}
}

// unguarded is set once a goroutine under control, inside an operation,
// stored into a field holding no mutex (see Options.Fine).
var unguarded atomic.Bool

// ResetFine forgets that a store outside any lock was seen: the runs of a
// new subject start without Options.Fine.
func ResetFine() { unguarded.Store(false) }

// inSection reports whether a read or write of a field by g needs no
// yield point: g holds a mutex under control and the run is not Fine.
func (r *run) inSection(g *gor) bool {
	return !r.opt.Fine && g.locks > 0
}

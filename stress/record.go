package stress

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/control"
	"github.com/retrybudget/retrybudget/internal/sched"
)

// Limits past which a loop is taken to spin: so many attempts at one
// instant of the clock (inside a bubble, attempts that no wait separates),
// or so many attempts in one call. The check then stops the loop and fails
// at once, instead of hanging until the child process is killed.
const (
	spinLimit    = 1000
	attemptLimit = 100_000
)

// callLimit is how long, on a bubble's clock, a check waits for a call
// before it reports that the call never returned: past what the spin
// guard allows a loop whose attempts take a second each.
const callLimit = 1000 * time.Hour

// errSpin is what the operation returns once the check has stopped a loop
// that spins: permanent, so that a loop that looks at errors stops.
var errSpin = fmt.Errorf("stress: the check stopped a loop that spins: %w", ErrPermanent)

// An attempt is one call of the operation, as a recorder saw it.
type attempt struct {
	start, end time.Time // end is zero while it runs
	onDone     bool      // ctx.Err() was set when it started
	afterMark  bool      // it started after the check called mark (after a cancel)
}

// A recorder runs one call of a loop for a check and wraps the check's
// operation: it notes when each attempt starts and ends, how many run at
// once, which start on a done context or after the check's cancel, and it
// stops a loop that spins. A recorder is for one call.
type recorder struct {
	t    *testing.T
	loop Loop
	fail func(ctx context.Context, n int) error // the check's operation; n counts attempts from 1

	began time.Time          // the start of the call
	stop  context.CancelFunc // cancels the call's context
	own   context.CancelFunc // if set, the call gets the check's context itself, and this cancels it
	ctl   *sched.Options     // if set, the call runs under control, with these options

	mu        sync.Mutex
	attempts  []*attempt
	running   int
	peak      int // the most attempts that ran at once
	marked    bool
	instant   time.Time    // the start of the last attempt
	atInstant int          // attempts that started at instant
	spun      int          // attempts refused since the loop was found spinning
	rep       sched.Report // the controlled run's, once ran
	ran       bool
}

func newRecorder(t *testing.T, l Loop, fail func(ctx context.Context, n int) error) *recorder {
	return &recorder{t: t, loop: l, fail: fail}
}

// A result is how a call ended.
type result struct {
	err     error
	at      time.Time // when the call returned
	running int       // attempts still running when it returned
	exited  bool      // the spin guard ended the call's goroutine: err is meaningless
}

// start runs the call on a goroutine of its own (so that the spin guard can
// end it) and returns the channel its result comes on. The call's context
// is derived from ctx (or is ctx itself, when r.own is set); release
// cancels it.
func (r *recorder) start(ctx context.Context, b budget.Budget, s Settings) <-chan result {
	if r.own != nil {
		r.stop = r.own
	} else {
		ctx, r.stop = context.WithCancel(ctx)
	}
	r.began = time.Now()
	ch := make(chan result, 1)
	go func() {
		res := result{exited: true}
		defer func() {
			res.at = time.Now()
			r.mu.Lock()
			res.running = r.running
			r.mu.Unlock()
			ch <- res
		}()
		call := func() {
			res.err = r.loop.Call(ctx, b, s, r.op)
			res.exited = false
		}
		if r.ctl == nil {
			call()
			return
		}
		rep := sched.Run(*r.ctl, call)
		r.mu.Lock()
		r.rep, r.ran = rep, true
		r.mu.Unlock()
	}()
	return ch
}

// runReport returns the report of the call's controlled run, and whether
// there was one that has ended.
func (r *recorder) runReport() (sched.Report, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rep, r.ctl != nil && r.ran
}

// callHere runs the call on the calling goroutine (a function of a
// controlled run that makes several calls) and writes how it ended to out,
// also when the spin guard ends the goroutine.
func (r *recorder) callHere(ctx context.Context, b budget.Budget, s Settings, out *result) {
	ctx, r.stop = context.WithCancel(ctx)
	r.began = time.Now()
	*out = result{exited: true}
	defer func() {
		out.at = time.Now()
		r.mu.Lock()
		out.running = r.running
		r.mu.Unlock()
	}()
	out.err = r.loop.Call(ctx, b, s, r.op)
	out.exited = false
}

// within waits for the result on ch for at most limit; when it does not
// come, it fails t, saying so and under which schedule, and returns false.
// Inside a bubble the limit is on the bubble's clock, so a call that hangs
// fails at once, with this message, before the bubble's deadlock panic.
func (r *recorder) within(t *testing.T, ch <-chan result, limit time.Duration, k int) (result, bool) {
	t.Helper()
	select {
	case res := <-ch:
		return res, true
	case <-time.After(limit):
	}
	c := r.counts()
	msg := fmt.Sprintf("%s had not returned %v into the call, after %d attempts, %d of them still running", r.loop.Name, limit, c.n, c.running)
	if r.ctl != nil {
		msg += fmt.Sprintf(", under control, schedule %d of %d (%v; %s replays it)", k+1, control.Schedules(), *r.ctl, control.Describe())
	}
	t.Error(msg)
	return result{}, false
}

// call runs the call and returns how it ended.
func (r *recorder) call(ctx context.Context, b budget.Budget, s Settings) result {
	return <-r.start(ctx, b, s)
}

// release cancels the call's context, so that whatever still waits on it
// ends. Checks call it last, once they have measured.
func (r *recorder) release() {
	if r.stop != nil {
		r.stop()
	}
}

// drain releases the call and waits, in the bubble's time, until no
// attempt runs (an hour at most), so that the bubble can end: a bubble
// whose test returns while goroutines still sleep panics.
func (r *recorder) drain() {
	r.release()
	for end := time.Now().Add(time.Hour); r.counts().running > 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
}

// op is the operation the loop is given.
func (r *recorder) op(ctx context.Context) error {
	now := time.Now()
	r.mu.Lock()
	if r.atInstant > 0 && now.Equal(r.instant) {
		r.atInstant++
	} else {
		r.instant, r.atInstant = now, 1
	}
	if r.spun > 0 || r.atInstant >= spinLimit || len(r.attempts) >= attemptLimit {
		r.spun++
		first, again := r.spun == 1, r.spun > spinLimit
		n, at := len(r.attempts)+1, r.atInstant
		r.mu.Unlock()
		if first {
			if at >= spinLimit {
				r.t.Errorf("%s made %d attempts at one instant, %v into the call: it retries without waiting, and virtual time stands still; the check stopped it", r.loop.Name, at, now.Sub(r.began))
			} else {
				r.t.Errorf("%s made %d attempts in one call; the check stopped it", r.loop.Name, n)
			}
			r.stop()
		}
		if again {
			// The loop ignores both the cancel and the permanent error:
			// end the goroutine that runs the attempt.
			runtime.Goexit()
		}
		return errSpin
	}
	a := &attempt{start: now, onDone: ctx.Err() != nil, afterMark: r.marked}
	r.attempts = append(r.attempts, a)
	n := len(r.attempts)
	r.running++
	r.peak = max(r.peak, r.running)
	r.mu.Unlock()

	err := r.fail(ctx, n)

	r.mu.Lock()
	a.end = time.Now()
	r.running--
	r.mu.Unlock()
	return err
}

// mark notes that the check has cancelled: attempts that start from now on
// are counted as after the cancel.
func (r *recorder) mark() {
	r.mu.Lock()
	r.marked = true
	r.mu.Unlock()
}

// spinning reports whether the spin guard stopped the loop; the check has
// failed then, and says no more.
func (r *recorder) spinning() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.spun > 0
}

// list returns the attempts so far, in the order they started.
func (r *recorder) list() []attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]attempt, len(r.attempts))
	for i, a := range r.attempts {
		out[i] = *a
	}
	return out
}

// counts are what a recorder has seen so far.
type counts struct {
	n         int // attempts
	running   int // attempts running now
	peak      int // the most attempts that ran at once
	afterMark int // attempts that started after the mark
	onDone    int // attempts that started on a done context
}

func (r *recorder) counts() counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := counts{n: len(r.attempts), running: r.running, peak: r.peak}
	for _, a := range r.attempts {
		if a.afterMark {
			c.afterMark++
		}
		if a.onDone {
			c.onDone++
		}
	}
	return c
}

// gap returns the time from the end of the first attempt to the start of
// the second, and false if there was no second attempt.
func (r *recorder) gap() (time.Duration, bool) {
	a := r.list()
	if len(a) < 2 || a[0].end.IsZero() {
		return 0, false
	}
	return a[1].start.Sub(a[0].end), true
}

// unmet fails t because the premise of a check did not happen: expected
// says what the check needed, saw what happened instead.
func unmet(t *testing.T, expected, saw string) {
	t.Helper()
	t.Errorf("premise not reached: expected %s; saw %s", expected, saw)
}

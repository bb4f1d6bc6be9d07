package unseen

import (
	"math"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

// TestCorrect puts every correct budget through the whole suite: each must
// pass every check.
func TestCorrect(t *testing.T) {
	for _, e := range correctEntries() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel() // correct budgets pass however their tests are run
			e.run(t)
		})
	}
}

// childEnv marks a child process of TestBroken under -race.
const childEnv = "UNSEEN_BROKEN_CHILD"

// knownEscapes are the broken budgets the suite is known to miss on some
// runs, each with why; their escapes are logged, not failed, so that the
// rest stays a gate. Each is a class of bug a later issue covers.
//
// None is left: ShardedInFlight, which escaped every mode before, is found
// by the Linearizable check's exhaustive stage.
var knownEscapes = map[string]string{}

// TestBroken runs the suite on every broken budget and fails only for a
// budget it does not catch. Under -race the race detector fails the test
// that made a data race whatever Verify returns, so each budget is then
// verified in a child process of its own, and a race report there counts as
// a catch too.
func TestBroken(t *testing.T) {
	for _, e := range brokenEntries() {
		t.Run(e.name, func(t *testing.T) {
			if raceEnabled && os.Getenv(childEnv) == "" {
				verifyInChild(t, e.name)
				return
			}
			err := e.verify(t)
			if err == nil {
				if why, ok := knownEscapes[e.name]; ok {
					t.Logf("%s escaped, as known: %s", e.name, why)
					return
				}
				t.Errorf("%s escaped", e.name)
				return
			}
			for _, line := range firstLines(err) {
				t.Logf("CAUGHT: %s", line)
			}
			if strings.Contains(err.Error(), "replay it with: -budgettest.replay=") {
				t.Logf("CAUGHT: under control, with a schedule to replay")
			}
		})
	}
}

// verifyInChild runs TestBroken's subtest name in a child process and
// reports what caught the budget, if anything did.
func verifyInChild(t *testing.T, name string) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBroken$/^"+regexp.QuoteMeta(name)+"$", "-test.v", "-test.count=1", "-test.timeout=30m")
	// The child need not wait the race detector's default second at exit.
	cmd.Env = append(os.Environ(), childEnv+"=1", "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	out, _ := cmd.CombinedOutput()
	caught := false
	for _, line := range strings.Split(string(out), "\n") {
		if _, rest, ok := strings.Cut(line, "CAUGHT: "); ok {
			caught = true
			t.Logf("CAUGHT: %s", rest)
		}
	}
	if strings.Contains(string(out), "WARNING: DATA RACE") {
		caught = true
		t.Logf("CAUGHT: race detector: WARNING: DATA RACE (%d reports)", strings.Count(string(out), "WARNING: DATA RACE"))
	}
	if !caught {
		if why, ok := knownEscapes[name]; ok {
			t.Logf("%s escaped, as known: %s", name, why)
			return
		}
		if !strings.Contains(string(out), name+" escaped") {
			t.Logf("child output:\n%s", out)
		}
		t.Errorf("%s escaped", name)
	}
}

// TestSequentialAgreement checks that every broken budget, driven by
// one goroutine, answers as its model does: its bug needs concurrency.
func TestSequentialAgreement(t *testing.T) {
	for _, e := range brokenEntries() {
		t.Run(e.name, func(t *testing.T) {
			for _, c := range []budgettest.Check{budgettest.CheckModel, budgettest.CheckSequential, budgettest.CheckReplay, budgettest.CheckEdges} {
				if err := e.check(t, c); err != nil {
					t.Errorf("%s: %v", c, err)
				}
			}
		})
	}
}

// A driver runs operations on a budget and keeps what they answered, so
// that a test can force one interleaving through testHook and then show
// that no order of the calls explains what the budget did.
type driver[S any] struct {
	t     *testing.T
	m     model.Model[S]
	b     budget.Budget
	clock *budget.ManualClock

	s S // the model's state after the sequential prefix

	// The racing part: inner calls ran, in this order, inside outer's call.
	raced bool
	outer call
	inner []call
	post  []call
}

type call struct {
	op      model.Op
	granted bool
}

func newDriver[S any](t *testing.T, m model.Model[S], build func(budget.Clock) budget.Budget) *driver[S] {
	clock := new(budget.ManualClock)
	return &driver[S]{t: t, m: m, b: build(clock), clock: clock, s: m.Init()}
}

// apply runs op on the budget (or its clock) and returns its answer.
func (d *driver[S]) apply(op model.Op) bool {
	k := budget.Kind(op.Kind)
	switch op.Op {
	case model.Request:
		d.b.Request()
	case model.Retry:
		return d.b.Retry(k)
	case model.Success:
		d.b.Success(k)
	case model.Advance:
		d.clock.Advance(op.D)
	case model.AttemptEnd:
		d.b.(budget.InFlightBudget).AttemptEnd(k)
	case model.CallEnd:
		d.b.(budget.InFlightBudget).CallEnd()
	default:
		d.t.Fatalf("unexpected operation %v", op)
	}
	return false
}

// seq runs ops one at a time on the budget and on the model, before the
// race, and fails on any answer that differs.
func (d *driver[S]) seq(ops ...model.Op) {
	d.t.Helper()
	for _, op := range ops {
		got := d.apply(op)
		var want bool
		d.s, want = d.m.Step(d.s, op)
		if got != want {
			d.t.Fatalf("sequential %v answered %v, the model %v", op, got, want)
		}
	}
}

// race runs outer on the budget and, when outer reaches point, runs inner,
// one after the other, on the same goroutine: the interleaving in which
// another goroutine's calls run at exactly that point of outer's.
func (d *driver[S]) race(point string, outer model.Op, inner ...model.Op) {
	d.t.Helper()
	fired := false
	testHook = func(p string) {
		if p != point || fired {
			return
		}
		fired = true
		for _, op := range inner {
			d.inner = append(d.inner, call{op, d.apply(op)})
		}
	}
	defer func() { testHook = nil }()
	d.outer = call{outer, d.apply(outer)}
	if !fired {
		d.t.Fatalf("%v never reached %q", outer, point)
	}
	d.raced = true
}

// after runs ops on the budget after the race, one at a time.
func (d *driver[S]) after(ops ...model.Op) []bool {
	var out []bool
	for _, op := range ops {
		c := call{op, d.apply(op)}
		d.post = append(d.post, c)
		out = append(out, c.granted)
	}
	return out
}

// available returns the budget's balance in milli-units.
func (d *driver[S]) available() int64 {
	return int64(math.Round(d.b.(budget.Balancer).Available() * milli))
}

// refute fails the test unless no order of the raced calls explains every
// answer the budget gave and its final balance. outer overlapped every
// inner call, so it may be ordered anywhere among them; the inner calls ran
// one after the other, and the calls after the race came after all of them.
func (d *driver[S]) refute() {
	d.t.Helper()
	if !d.raced {
		d.t.Fatal("refute before race")
	}
	bal := d.available()
	for pos := 0; pos <= len(d.inner); pos++ {
		order := append(append(append([]call{}, d.inner[:pos]...), d.outer), d.inner[pos:]...)
		order = append(order, d.post...)
		s, ok := d.s, true
		for _, c := range order {
			var g bool
			s, g = d.m.Step(s, c.op)
			if c.op.Op == model.Retry && g != c.granted {
				ok = false
			}
		}
		if mb, isB := d.m.(model.Balanced[S]); isB && mb.Balance(s) != bal {
			ok = false
		}
		if ok {
			d.t.Fatalf("the order %v explains what the budget did: no bug shown", order)
		}
	}
	d.t.Logf("outer %v, inner %v, after %v, balance %.3f: no order of the calls explains it", d.outer, d.inner, d.post, float64(bal)/milli)
}

func (c call) String() string { return model.Describe(c.op, c.granted) }

func repeat(n int, op model.Op) []model.Op {
	ops := make([]model.Op, n)
	for i := range ops {
		ops[i] = op
	}
	return ops
}

var (
	retryT   = model.OpRetry(model.Transient)
	retryTh  = model.OpRetry(model.Throttled)
	succ1st  = model.OpSuccess(model.FirstAttempt)
	succT    = model.OpSuccess(model.Transient)
	succTh   = model.OpSuccess(model.Throttled)
	endT     = model.OpAttemptEnd(model.Transient)
	request  = model.OpRequest
	callEnd  = model.OpCallEnd
	advance  = model.OpAdvance
	to100AWS = repeat(80, retryTh) // 500 - 80×5 = 100 tokens
)

// drainTo3 leaves refillModel's bucket with 3 tokens at instant 0.
var drainTo3 = []model.Op{retryT, retryT, retryT, retryTh}

// TestEvidence forces each broken budget's bad interleaving through
// testHook and checks the wrong outcome its doc comment names, and that no
// order of the calls explains it.
func TestEvidence(t *testing.T) {
	t.Run("LoadAddBucket", func(t *testing.T) {
		d := newDriver(t, awsModel, func(budget.Clock) budget.Budget { return NewLoadAddBucket(awsModel) })
		d.seq(repeat(35, retryT)...) // 10 tokens
		d.seq(repeat(4, succ1st)...) // 14 tokens
		d.race("loadadd.retry", retryT, retryT)
		if !d.outer.granted || !d.inner[0].granted || d.available() != -14_000 {
			t.Fatalf("want two grants and -14 tokens (over-grant), got %v %v %d", d.outer, d.inner, d.available())
		}
		d.refute()
	})
	t.Run("StaleCASBucket", func(t *testing.T) {
		d := newDriver(t, awsModel, func(budget.Clock) budget.Budget { return NewStaleCASBucket(awsModel) })
		d.seq(to100AWS...)
		d.race("stalecas.success", succ1st, retryT)
		if !d.inner[0].granted || d.available() != 101_000 {
			t.Fatalf("want the retry granted and 101 tokens (its charge undone), got %v, %d", d.inner, d.available())
		}
		if got := d.after(repeat(7, retryT)...); !got[6] {
			t.Fatalf("want a 7th transient retry granted from the 101 tokens (the model has 87: 6), got %v", got)
		}
		d.refute()
	})
	t.Run("RLockBucket", func(t *testing.T) {
		d := newDriver(t, awsModel, func(budget.Clock) budget.Budget { return NewRLockBucket(awsModel) })
		d.seq(to100AWS...)
		d.race("rlock.success", succT, succTh)
		if d.available() != 114_000 {
			t.Fatalf("want 114 tokens (the throttled refund lost; the model has 119), got %d", d.available())
		}
		d.refute()
	})
	t.Run("SplitAtomicsBucket", func(t *testing.T) {
		d := newDriver(t, refillModel, func(c budget.Clock) budget.Budget { return NewSplitAtomicsBucket(refillModel, c) })
		d.seq(drainTo3...)
		d.seq(advance(5500 * time.Millisecond)) // 11 tokens due: 14
		d.race("splitatomics.claimed", succ1st, retryT)
		if d.inner[0].granted || d.available() != 15_000 {
			t.Fatalf("want the retry denied with 14 tokens due and 15 tokens left (under-grant), got %v, %d", d.inner, d.available())
		}
		d.refute()
	})
	t.Run("DoubleRefillBucket", func(t *testing.T) {
		d := newDriver(t, refillModel, func(c budget.Clock) budget.Budget { return NewDoubleRefillBucket(refillModel, c) })
		d.seq(drainTo3...)
		d.seq(advance(5500 * time.Millisecond))
		d.race("doublerefill.computed", retryTh, retryT)
		if !d.outer.granted || !d.inner[0].granted || d.available() != 6_000 {
			t.Fatalf("want both retries granted and 6 tokens left (the interval refilled twice), got %v %v %d", d.outer, d.inner, d.available())
		}
		d.refute()
	})
	t.Run("ComposedLocksRatio", func(t *testing.T) {
		d := newDriver(t, sreModel, func(c budget.Clock) budget.Budget { return NewComposedLocksRatio(sreModel, c) })
		d.seq(retryT, retryT)
		d.race("composed.allowed", retryT, retryT)
		if !d.outer.granted || !d.inner[0].granted {
			t.Fatalf("want both granted: 4 retries where the floor allows 3, got %v %v", d.outer, d.inner)
		}
		d.refute()
	})
	t.Run("LateTotalRatio", func(t *testing.T) {
		d := newDriver(t, sreModel, func(c budget.Clock) budget.Budget { return NewLateTotalRatio(sreModel, c) })
		d.seq(retryT, retryT)
		d.race("latetotal.unlocked", retryT, retryT)
		if !d.outer.granted || !d.inner[0].granted {
			t.Fatalf("want both granted: 4 retries where the floor allows 3, got %v %v", d.outer, d.inner)
		}
		d.refute()
	})
	t.Run("RecheckRatio", func(t *testing.T) {
		d := newDriver(t, fixedModel, func(c budget.Clock) budget.Budget { return NewRecheckRatio(fixedModel, c) })
		d.seq(advance(time.Second)) // a new window
		d.race("recheck.stale", request, repeat(39, request)...)
		if got := d.after(repeat(4, retryT)...); got[3] {
			t.Fatalf("want the 4th retry denied (39 of the 40 requests lost; the model allows 4), got %v", got)
		}
		d.refute()
	})
	t.Run("ClampStoreThrottle", func(t *testing.T) {
		d := newDriver(t, throttleModel, func(budget.Clock) budget.Budget { return NewClampStoreThrottle(throttleModel) })
		d.race("clampstore.over", succ1st, retryT)
		if !d.inner[0].granted || d.available() != 10_000 {
			t.Fatalf("want the retry granted and the count back at 10 (its token lost), got %v, %d", d.inner, d.available())
		}
		d.after(repeat(4, retryT)...)
		d.refute()
	})
	t.Run("LazyThrottle", func(t *testing.T) {
		d := newDriver(t, throttleModel, func(budget.Clock) budget.Budget { return NewLazyThrottle(throttleModel) })
		d.race("lazy.alloc", retryT, retryT)
		if !d.outer.granted || !d.inner[0].granted || d.available() != 9_000 {
			t.Fatalf("want both granted and 9 tokens left (one token lost; the model has 8), got %v %v %d", d.outer, d.inner, d.available())
		}
		if got := d.after(repeat(4, retryT)...); !got[2] || got[3] {
			t.Fatalf("want 3 more retries granted after the race (from 8 tokens the model grants 2), got %v", got)
		}
		d.refute()
	})
	t.Run("RereadThrottle", func(t *testing.T) {
		d := newDriver(t, throttleModel, func(budget.Clock) budget.Budget { return NewRereadThrottle(throttleModel) })
		d.seq(repeat(4, retryT)...)  // 6 tokens
		d.seq(repeat(5, succ1st)...) // 6.5 tokens
		d.race("reread.unlocked", retryT, retryT)
		if d.outer.granted || d.inner[0].granted {
			t.Fatalf("want both denied (under-grant), got %v %v", d.outer, d.inner)
		}
		d.refute()
	})
	t.Run("CheckThenActInFlight", func(t *testing.T) {
		d := newDriver(t, envoyModel, func(budget.Clock) budget.Budget { return NewCheckThenActInFlight(envoyModel) })
		d.seq(request, request, retryT, retryT)
		d.race("checkthenact.admitted", retryT, retryT)
		if !d.outer.granted || !d.inner[0].granted {
			t.Fatalf("want both granted: 4 retries in flight where 3 are allowed, got %v %v", d.outer, d.inner)
		}
		d.refute()
	})
	t.Run("OptimisticInFlight", func(t *testing.T) {
		d := newDriver(t, envoyModel, func(budget.Clock) budget.Budget { return NewOptimisticInFlight(envoyModel) })
		d.seq(request, request, request, retryT, retryT, retryT)
		d.race("optimistic.taken", retryT, endT, retryT)
		if d.outer.granted || d.inner[1].granted {
			t.Fatalf("want both retries denied after an end freed a slot (under-grant), got %v %v", d.outer, d.inner)
		}
		d.refute()
	})
	t.Run("ShardedInFlight", func(t *testing.T) {
		var b *ShardedInFlight
		d := newDriver(t, envoyModel, func(budget.Clock) budget.Budget { b = NewShardedInFlight(envoyModel); return b })
		d.seq(repeat(19, request)...)
		d.seq(retryT, retryT, retryT)
		b.next.Store(shardCount - 1) // the next start or end lands on shard 0, the one after on shard 1
		d.race("sharded.summing", retryT, callEnd, request)
		if !d.outer.granted {
			t.Fatalf("want the retry granted on a sum of 20 calls (never more than 19 in flight), got %v", d.outer)
		}
		d.refute()
	})
}

package redisbudget_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/redisbudget"
)

// With the append-only file on and appendfsync always, a SIGKILL of the
// server and a restart are not a reset: the history has no reset operation
// and is linearizable across the crash, so the fleet was granted no more
// than the model allows. The calls that failed meanwhile are pending.
// Run with -redis.scenarios=50 for the acceptance level.
func TestLinearizableAcrossCrashWithAOF(t *testing.T) {
	s := startServerAOF(t, "always")
	checkScenarios(t, "aof-always-kill", *scenarios, func(sc linearizability.Scenario, newClient func(redisbudget.Config) (netBudget, error)) model.History {
		var restarted int64
		h := record(t, serverRig(t, s), sc, func(r *recording) {
			s.kill()
			r.killed(r.now())
			s.start() // answers only once the file is loaded
			restarted = r.now()
		}, newClient)
		if answeredAfter(h, len(sc.Goroutines), restarted) == 0 {
			t.Errorf("no call was answered after the restart: the crash did not happen mid-run")
		}
		return h
	})
}

// The same crash without persistence, and without a reset in the history,
// is a violation: the check can tell a crash that loses the budget from
// one that does not.
func TestCrashWithoutPersistenceIsCaught(t *testing.T) {
	s := startServer(t)
	// A bucket that only drains, so that a full one after the crash
	// grants what the model cannot.
	m := model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, NoRefund: true}
	for seed := range uint64(20) {
		sc := scenario(seed+1, 11, seqcheck.Timing{})
		rg := serverRig(t, s)
		h := record(t, rg, sc, func(r *recording) {
			r.clockMu.Lock()
			defer r.clockMu.Unlock()
			s.kill()
			s.startWith(map[string]string{rg.clockKey: strconv.FormatInt(r.clockAt, 10)})
		}, func(c redisbudget.Config) (netBudget, error) { return tokenBucketClient(m, c) })
		if r := linearizability.Check(m, h, 60*time.Second); r.Verdict == linearizability.Violation {
			t.Logf("scenario %d: the lost budget is a violation:\n%s", seed+1, r.Explain())
			return
		}
	}
	t.Fatal("20 crashes without persistence, recorded without a reset, showed no violation")
}

// What appendfsync everysec costs. A SIGKILL of the server alone loses
// nothing that Redis has answered, since it hands each write to the kernel
// before it replies (unless a slow fsync makes it postpone writes, for at
// most 2s). A crash of the machine loses what was not yet fsynced: up to a
// second of writes. The test measures both: the balance after a SIGKILL,
// and the balance after the append-only file is put back as it was one
// second before the kill, which is what a machine crash leaves. It logs the
// retries each granted beyond the budget.
func TestAOFEverysecLoss(t *testing.T) {
	t.Parallel() // it mostly waits, for the paced calls
	s := startServerAOF(t, "everysec")
	ctx := context.Background()
	const capacity = 9000
	cfg := budget.TokenBucketConfig{Capacity: capacity, TransientCost: 1, ThrottledCost: 1, NoRefund: true} // no refill: the balance counts the grants
	newBucket := func(name string) *redisbudget.TokenBucket {
		b, err := redisbudget.NewTokenBucket(redisbudget.Config{Client: s.client(t), Name: name, CallTimeout: time.Second}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// spend grants retries from 8 clients at about rate a second for d,
	// and returns how many were granted.
	spend := func(name string, rate int, d time.Duration) int64 {
		var granted atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			b := newBucket(name)
			wg.Go(func() {
				tick := time.NewTicker(time.Second * 8 / time.Duration(rate))
				defer tick.Stop()
				for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
					if ok, err := b.RetryContext(ctx, budget.Transient); ok && err == nil {
						granted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return granted.Load()
	}
	// left drains the bucket after a restart and returns how many retries
	// it still granted.
	left := func(name string) int64 {
		b := newBucket(name)
		var n int64
		for {
			ok, err := b.RetryContext(ctx, budget.Transient)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return n
			}
			n++
		}
	}
	const rate = 500
	aof := filepath.Join(s.dir, "appendonlydir")

	// A SIGKILL.
	name := fresh("everysec")
	before := spend(name, rate, 200*time.Millisecond)
	last := spend(name, rate, time.Second)
	s.kill()
	s.start()
	extra := left(name) - (capacity - before - last)
	t.Logf("SIGKILL with everysec: %d retries granted in the last second at %d/s; %d granted again after the restart", last, rate, extra)
	if extra < 0 || extra > last {
		t.Errorf("after a SIGKILL the bucket granted %d retries beyond the budget, outside [0, %d], the last second's grants", extra, last)
	}

	// A machine crash: the file as it was one second before the kill.
	name = fresh("everysec")
	before = spend(name, rate, 200*time.Millisecond)
	snap := filepath.Join(t.TempDir(), "appendonlydir")
	if err := os.CopyFS(snap, os.DirFS(aof)); err != nil {
		t.Fatal(err)
	}
	last = spend(name, rate, time.Second)
	s.kill()
	if err := os.RemoveAll(aof); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(aof, os.DirFS(snap)); err != nil {
		t.Fatal(err)
	}
	s.start()
	extra = left(name) - (capacity - before - last)
	t.Logf("one second of lost writes with everysec: %d retries granted in that second at %d/s; %d granted again after the restart", last, rate, extra)
	// The copy holds every write made before it, unless redis postponed
	// writing its AOF buffer (it does, for up to 2 s, while an fsync is
	// slow, and replies meanwhile): the grants just before the copy are
	// then lost too, and granted again.
	if extra < last || extra > last+before {
		t.Errorf("after losing the last second's writes the bucket granted %d retries beyond the budget, want %d (that second's grants), or up to %d more (the grants just before the copy, if redis had not written them yet)", extra, last, before)
	} else if extra > last {
		t.Logf("%d grants made just before the copy were not in it yet: redis postponed its AOF write", extra-last)
	}
}

package stress

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The HedgeLosersCancelled check. A loop that hedges starts another
// attempt beside one that is slow to answer; once one wins, the others are
// load for nothing: it cancels them at once and waits for them. A loop that
// only waits for them lasts as long as its slowest attempt, and so keeps
// the very latency hedging was for.

// Timings of the check's call: the first attempt answers after
// loserRuns unless cancelled; the hedge starts after hedgeDelay and
// answers at once.
const (
	hedgeDelay = 10 * time.Millisecond
	loserRuns  = 10 * time.Second
)

func checkHedgeLosersCancelled(t *testing.T, l Loop) {
	paths := []struct {
		name      string
		asks      bool // Settings.HedgeAsksBudget
		deny      bool // the budget denies every retry
		hedgesRun bool
	}{
		{"hedges free", false, false, true}, // asking anyway is no fault: the budget grants
		{"hedges granted", true, false, true},
		{"hedges denied", true, true, false},
	}
	for _, p := range paths {
		t.Run(strings.ReplaceAll(p.name, " ", "_"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var mu sync.Mutex
				var loserCancelled bool
				r := newRecorder(t, l, func(ctx context.Context, n int) error {
					if n > 1 {
						return nil
					}
					select {
					case <-ctx.Done():
						mu.Lock()
						loserCancelled = true
						mu.Unlock()
						return ctx.Err()
					case <-time.After(loserRuns):
						return nil
					}
				})
				defer r.drain()
				sp := &askSpy{grants: grantAll}
				if p.deny {
					sp.grants = 0
				}
				s := Settings{MaxAttempts: 3, BaseDelay: time.Hour, MaxDelay: time.Hour, FixedDelay: true, NoJitter: true,
					HedgeDelay: hedgeDelay, HedgeAsksBudget: p.asks}
				res := r.call(ctx, sp, s)
				if r.spinning() {
					return
				}
				took := res.at.Sub(r.began)
				c := r.counts()
				asks := sp.asked()
				saw := fmt.Sprintf("%s made %d attempts, at most %d at once, asked the budget %d times, and returned after %v with %v",
					l.Name, c.n, c.peak, asks, took, res.err)
				switch {
				case p.deny && asks == 0 && c.peak > 1:
					t.Errorf("%s: %s; with HedgeAsksBudget set, a hedge starts only once the budget grants it, and this budget grants none", p.name, saw)
					return
				case p.deny && c.n > 1:
					t.Errorf("%s: %s; the budget denied every hedge, so no attempt but the first may run", p.name, saw)
					return
				case p.deny:
					if asks == 0 {
						unmet(t, fmt.Sprintf("a hedge asked for, %v into a first attempt that runs %v, with HedgeDelay %v and HedgeAsksBudget set", hedgeDelay, loserRuns, hedgeDelay),
							saw+" (a loop that does not hedge Skips HedgeLosersCancelled)")
					}
					return
				case c.peak < 2:
					unmet(t, fmt.Sprintf("a hedge: a second attempt %v into a first that runs %v, with HedgeDelay %v", hedgeDelay, loserRuns, hedgeDelay),
						saw+" (a loop that does not hedge Skips HedgeLosersCancelled; one that hedges honours HedgeDelay)")
					return
				case p.asks && asks == 0:
					t.Errorf("%s: %s; with HedgeAsksBudget set, a hedge is a retry the budget grants first (an adapter whose loop cannot ask Skips the check)", p.name, saw)
					return
				}
				mu.Lock()
				cancelled := loserCancelled
				mu.Unlock()
				if !cancelled {
					t.Errorf("%s: %s; the hedge won %v in, but the first attempt's context was not cancelled: the loser ran its full %v and the call lasted as long; a loop that hedges cancels its losers at once",
						p.name, saw, hedgeDelay, loserRuns)
				}
				if res.running > 0 {
					t.Errorf("%s: %s; %d attempt(s) still ran when the call returned: a loop that hedges waits for the losers it cancels", p.name, saw, res.running)
				}
			})
		})
	}
}

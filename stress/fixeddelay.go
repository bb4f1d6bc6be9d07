package stress

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// probeDelay is the BaseDelay of the FixedDelay probe.
const probeDelay = 10 * time.Millisecond

// fixedDelayHonoured runs one call of l, in a bubble, under FixedDelay and
// NoJitter with every attempt failing with ErrTransient, and reports
// whether every wait between attempts was BaseDelay exactly. The checks
// whose premise is a wait that ends at a chosen instant run it first: an
// adapter that ignores FixedDelay (a jittered wait) would reach their
// premise in some runs and not in others, so their verdict would change
// between runs. A loop that makes fewer than two attempts shows no wait,
// and the check goes on (it says what it needed, if it does not see it).
func fixedDelayHonoured(t *testing.T, l Loop) bool {
	t.Helper()
	ok := true
	synctest.Test(t, func(t *testing.T) {
		// HedgeDelay an hour: a loop that hedges does not hedge here, so every
		// second attempt is a retry after a wait.
		s := Settings{MaxAttempts: 3, BaseDelay: probeDelay, MaxDelay: time.Second, FixedDelay: true, NoJitter: true, HedgeDelay: time.Hour}
		r := newRecorder(t, l, func(context.Context, int) error { return ErrTransient })
		defer r.drain()
		r.call(context.Background(), &spy{inner: unlimited{}}, s)
		if r.spinning() {
			ok = false
			return
		}
		var waits []string
		exact := true
		a := r.list()
		for i := 1; i < len(a); i++ {
			if a[i-1].end.IsZero() {
				continue
			}
			w := a[i].start.Sub(a[i-1].end)
			waits = append(waits, w.String())
			exact = exact && w == probeDelay
		}
		if !exact {
			ok = false
			unmet(t, fmt.Sprintf("waits of BaseDelay (%v) exactly between attempts failing with ErrTransient, under FixedDelay and NoJitter", probeDelay),
				fmt.Sprintf("%s waited %s: the adapter ignores FixedDelay or NoJitter, so this check's premise (a wait that ends at a chosen instant) would come about in some runs and not others; map them onto the loop's options (a constant backoff, no jitter)",
					l.Name, strings.Join(waits, ", ")))
		}
	})
	return ok && !t.Failed()
}

// fixedDelayFirst returns run, preceded by the FixedDelay probe: a loop
// that does not honour FixedDelay fails with "premise not reached" every
// run, instead of a verdict that changes between runs.
func fixedDelayFirst(run func(t *testing.T, l Loop)) func(t *testing.T, l Loop) {
	return func(t *testing.T, l Loop) {
		t.Helper()
		if fixedDelayHonoured(t, l) {
			run(t, l)
		}
	}
}

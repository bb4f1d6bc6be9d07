package harness

import (
	"testing"
	"time"
)

// The watchdog fires after its limit of ticks without progress, and not
// when the process itself was held up: a 90 s gap between two ticks (a
// paused machine) counts as two ticks, not as 90 s.
func TestWatchdogCountsOnlyTimeTheProcessRan(t *testing.T) {
	const limit, tick = 60 * time.Second, 7500 * time.Millisecond
	start := time.Unix(0, 0)
	ticks := func(w *watchdog, from time.Time, n int, progress uint64) (time.Time, int) {
		for i := 1; i <= n; i++ {
			from = from.Add(tick)
			if w.stuck(from, progress, false) {
				return from, i
			}
		}
		return from, 0
	}
	w := newWatchdog(limit, tick, 5, start)
	if _, fired := ticks(w, start, 20, 5); fired != 8 {
		t.Errorf("no progress: fired at tick %d, want 8 (60 s of 7.5 s ticks)", fired)
	}

	w = newWatchdog(limit, tick, 5, start)
	now, _ := ticks(w, start, 4, 5) // 30 s quiet
	now = now.Add(90 * time.Second)
	if w.stuck(now, 5, false) {
		t.Fatal("fired on a tick 90 s late: the process was held up, not the budget")
	}
	if _, fired := ticks(w, now, 20, 5); fired != 2 {
		t.Errorf("after the gap: fired %d ticks later, want 2 (30 s + 2 ticks for the gap + 2 ticks)", fired)
	}

	w = newWatchdog(limit, tick, 5, start)
	now, _ = ticks(w, start, 7, 5)
	if w.stuck(now.Add(tick), 6, false) {
		t.Fatal("fired on a tick with progress")
	}
	if _, fired := ticks(w, now.Add(tick), 20, 6); fired != 8 {
		t.Errorf("after progress: fired at tick %d, want 8", fired)
	}
	w = newWatchdog(limit, tick, 5, start)
	for i := 1; i <= 20; i++ {
		if w.stuck(start.Add(time.Duration(i)*tick), 5, true) {
			t.Fatalf("fired at tick %d while the suite's own computation ran", i)
		}
	}
}

// Package counter counts events in a sliding window of time slots. Each
// Window holds a mutex of its own.
package counter

import (
	"sync"
	"time"
)

// A Window counts events in n slots of one width. Slots move on with the
// latest instant the Window has been given; an earlier instant counts as
// that one.
type Window struct {
	mu    sync.Mutex
	width int64
	slots []int64
	head  int64 // slot number of the newest slot
}

// New returns an empty Window of n slots over window, whose newest slot
// holds now.
func New(window time.Duration, n int64, now time.Duration) *Window {
	w := &Window{width: int64(window) / n, slots: make([]int64, n)}
	w.head = slotOf(int64(now), w.width)
	return w
}

// slotOf returns t divided by width, rounded towards negative infinity.
func slotOf(t, width int64) int64 {
	s := t / width
	if t%width != 0 && t < 0 {
		s--
	}
	return s
}

// roll moves the newest slot to now's, emptying the slots it passes: at
// most n of them, all at once past that. w.mu must be held.
func (w *Window) roll(now time.Duration) {
	h := slotOf(int64(now), w.width)
	if h <= w.head {
		return
	}
	gap := h - w.head // may overflow to negative across the int64 range
	n := int64(len(w.slots))
	if gap >= n || gap < 0 {
		clear(w.slots)
	} else {
		for i := int64(1); i <= gap; i++ {
			w.slots[((w.head+i)%n+n)%n] = 0
		}
	}
	w.head = h
}

// Add adds d events at now.
func (w *Window) Add(now time.Duration, d int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roll(now)
	n := int64(len(w.slots))
	w.slots[(w.head%n+n)%n] += d
}

// Sum returns the events in the window whose newest slot holds now.
func (w *Window) Sum(now time.Duration) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roll(now)
	var s int64
	for _, v := range w.slots {
		s += v
	}
	return s
}

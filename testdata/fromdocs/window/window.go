// Package window keeps counts of events in a sliding window of numbered
// time slots. It knows nothing of clocks: its caller turns instants into
// slot numbers and promises never to add to a slot older than the newest
// one it has added to.
package window

import "sync"

// A Counter counts events per slot in a ring of fixed size. The window whose
// newest slot is h holds slots h-size+1 through h.
//
// Counter is safe for concurrent use; each method holds its own mutex.
type Counter struct {
	mu    sync.Mutex
	cells []cell
}

type cell struct {
	n     int64 // slot number the count belongs to
	count int64
}

// New returns an empty Counter of size slots (size >= 1).
func New(size int) *Counter {
	return &Counter{cells: make([]cell, size)}
}

// Size returns the number of slots in the window.
func (c *Counter) Size() int64 { return int64(len(c.cells)) }

// Add adds k to slot number n. A cell that held an older slot is reused.
func (c *Counter) Add(n, k int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := n % int64(len(c.cells))
	if i < 0 {
		i += int64(len(c.cells))
	}
	if c.cells[i].n != n {
		c.cells[i] = cell{n: n}
	}
	c.cells[i].count += k
}

// Sum returns the total count of the window whose newest slot is h.
func (c *Counter) Sum(h int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var total int64
	for _, x := range c.cells {
		// uint64 distance is exact even when h-n overflows int64; a cell
		// newer than h (never the case for a caller that keeps its promise)
		// gives a huge distance and is left out.
		if uint64(h)-uint64(x.n) < uint64(len(c.cells)) {
			total += x.count
		}
	}
	return total
}

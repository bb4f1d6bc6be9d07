// Package lockbox is a small helper module for package designs: a pair of
// counters behind a mutex of its own, whose every method holds that mutex
// for its whole run. It knows nothing of retry budgets; a budget that keeps
// its state here borrows this module's lock.
package lockbox

import "sync"

// A Pair is two int64 counters guarded by one mutex. The zero Pair holds
// two zeros. A Pair must not be copied after first use.
type Pair struct {
	mu   sync.Mutex
	a, b int64
}

// Load returns both counters, read together under the mutex.
func (p *Pair) Load() (a, b int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.a, p.b
}

// Update calls f with both counters under the mutex and stores what it
// returns; its third result is Update's. f must not call p back.
func (p *Pair) Update(f func(a, b int64) (na, nb int64, result bool)) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	na, nb, r := f(p.a, p.b)
	p.a, p.b = na, nb
	return r
}

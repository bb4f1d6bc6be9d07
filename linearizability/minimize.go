package linearizability

import (
	"slices"
	"time"

	"github.com/retrybudget/retrybudget/model"
)

// MinimizeReport says what Minimize did. Witness is what fails returned for
// the last failing run of To.
type MinimizeReport[W any] struct {
	From, To Scenario
	Witness  W
	Runs     int           // scenario runs made, failing or not
	Elapsed  time.Duration // time spent
}

// Minimize shrinks a failing scenario. fails runs a scenario once and
// reports whether it failed, with a witness of the failure (a history, say);
// a candidate counts as failing if any of up to tries runs fails.
//
// Minimize drops whole goroutines, then the clock, then chunks of each
// operation list (halves, quarters, down to single operations), keeping
// every drop after which the scenario still fails, until a full pass drops
// nothing. It returns the smallest scenario it found and the witness of its
// last failure; if no run of s fails at all, To is s and Witness is zero.
//
// A concurrent failure reproduces only some of the time. A drop is kept only
// when the smaller scenario really failed, so To always has a failure behind
// it. A drop can be refused wrongly when the smaller scenario fails too
// rarely to show within tries runs: more tries give smaller results.
func Minimize[W any](s Scenario, tries int, fails func(Scenario) (W, bool)) MinimizeReport[W] {
	return MinimizeWithin(s, tries, 0, fails)
}

// MinimizeWithin is Minimize that stops dropping after limit (zero means no
// limit) and returns the smallest scenario found by then.
func MinimizeWithin[W any](s Scenario, tries int, limit time.Duration, fails func(Scenario) (W, bool)) MinimizeReport[W] {
	start := time.Now()
	rep := MinimizeReport[W]{From: s}
	first := true
	try := func(c Scenario) bool {
		if !first && limit > 0 && time.Since(start) > limit {
			return false
		}
		first = false
		for range max(tries, 1) {
			rep.Runs++
			if w, failed := fails(c); failed {
				rep.Witness = w
				return true
			}
		}
		return false
	}
	cur := clone(s)
	if !try(cur) {
		rep.To = cur
		rep.Elapsed = time.Since(start)
		return rep
	}
	for changed := true; changed; {
		changed = false
		for i := len(cur.Goroutines) - 1; i >= 0 && len(cur.Goroutines) > 1; i-- {
			c := clone(cur)
			c.Goroutines = slices.Delete(c.Goroutines, i, i+1)
			if try(c) {
				cur, changed = c, true
			}
		}
		if len(cur.Clock) > 0 {
			c := clone(cur)
			c.Clock = nil
			if try(c) {
				cur, changed = c, true
			}
		}
		// Chunks of each list. A list is addressed through a function, so
		// that one loop serves the prefix, the goroutines and the clock.
		lists := []func(*Scenario) *[]model.Op{func(s *Scenario) *[]model.Op { return &s.Before }}
		for g := range cur.Goroutines {
			lists = append(lists, func(s *Scenario) *[]model.Op {
				if g < len(s.Goroutines) {
					return &s.Goroutines[g]
				}
				return new([]model.Op)
			})
		}
		for _, list := range lists {
			if shrinkList(&cur, list, try) {
				changed = true
			}
		}
		if shrinkClock(&cur, try) {
			changed = true
		}
		cur.Goroutines = slices.DeleteFunc(cur.Goroutines, func(g []model.Op) bool { return len(g) == 0 })
	}
	rep.To = cur
	rep.Elapsed = time.Since(start)
	return rep
}

// shrinkList drops chunks of one operation list of cur while it still
// fails, from chunks of half the list down to single operations.
func shrinkList(cur *Scenario, list func(*Scenario) *[]model.Op, try func(Scenario) bool) bool {
	changed := false
	for chunk := max(len(*list(cur))/2, 1); chunk >= 1; chunk /= 2 {
		for at := len(*list(cur)) - chunk; at >= 0; at -= chunk {
			c := clone(*cur)
			l := list(&c)
			if at+chunk > len(*l) {
				continue
			}
			*l = slices.Delete(*l, at, at+chunk)
			if try(c) {
				*cur, changed = c, true
			}
		}
		if chunk == 1 {
			break
		}
	}
	return changed
}

// shrinkClock drops single clock steps while the scenario still fails.
func shrinkClock(cur *Scenario, try func(Scenario) bool) bool {
	changed := false
	for i := len(cur.Clock) - 1; i >= 0; i-- {
		c := clone(*cur)
		c.Clock = slices.Delete(c.Clock, i, i+1)
		if try(c) {
			*cur, changed = c, true
		}
	}
	return changed
}

func clone(s Scenario) Scenario {
	c := Scenario{Before: slices.Clone(s.Before), Clock: slices.Clone(s.Clock)}
	c.Goroutines = make([][]model.Op, len(s.Goroutines))
	for i, g := range s.Goroutines {
		c.Goroutines[i] = slices.Clone(g)
	}
	return c
}

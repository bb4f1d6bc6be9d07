package budget

import (
	"context"
	"sync/atomic"
)

// Stats are a budget's counts of its answers to Retry since it was built:
// the retries it granted and the ones it denied. They only grow, so a
// metrics system can export them as monotonic counters.
type Stats struct {
	Granted uint64 // retries granted
	Denied  uint64 // retries denied, a kind that is not a retry kind included
}

// A StatsBudget is a Budget that counts its answers. Every budget of this
// module is one: [TokenBucket], [Ratio], [Throttle], [InFlight] and the
// budgets of package redisbudget, which count the answers of one process.
type StatsBudget interface {
	Budget
	// Stats returns the counts so far. The two counts are read one after
	// the other, not at one instant.
	Stats() Stats
}

// A Balancer is a budget that can tell how much it holds: tokens for a
// TokenBucket or a Throttle, retries it would still grant for a Ratio or an
// InFlight. The balance is for metrics only: by the time it returns, other
// goroutines may have changed it, so never decide a retry by it.
//
// Available must change nothing: a read that applies a refill, rotates a
// window or otherwise moves the state (beyond what the answers of later
// calls would see anyway) makes the budget's answers depend on when it is
// observed. The conformance suite (package budgettest) reads it between
// calls and compares it with the model's balance, to a thousandth; a
// budget whose Available advances its state parts from the model there.
type Balancer interface {
	Available() float64
}

// A ContextBalancer is a budget whose balance lives elsewhere, as a Redis
// budget's does: reading it can fail or take time.
type ContextBalancer interface {
	AvailableContext(ctx context.Context) (float64, error)
}

// counts keeps a budget's Stats. Its counters sit next to the budget's hot
// word, inside the same padding, so that a grant that owns that cache line
// to change the word counts itself there too.
type counts struct {
	granted, denied atomic.Uint64
}

// count counts the answer ok and returns it.
func (c *counts) count(ok bool) bool {
	if ok {
		c.granted.Add(1)
	} else {
		c.denied.Add(1)
	}
	return ok
}

func (c *counts) stats() Stats {
	return Stats{Granted: c.granted.Load(), Denied: c.denied.Load()}
}

var (
	_ StatsBudget = (*TokenBucket)(nil)
	_ StatsBudget = (*Ratio)(nil)
	_ StatsBudget = (*Throttle)(nil)
	_ StatsBudget = (*InFlight)(nil)
	_ Balancer    = (*TokenBucket)(nil)
	_ Balancer    = (*Ratio)(nil)
	_ Balancer    = (*Throttle)(nil)
	_ Balancer    = (*InFlight)(nil)
)

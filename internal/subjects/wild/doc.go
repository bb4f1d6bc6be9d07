// Package wild holds broken retry budgets: each is a plausible bug a team
// could ship (balance drift, time handling, lost credits, concurrency,
// volume, degenerate constants), written from the budget contract and the
// models alone, without reading the checks, so that the bugs are not tuned
// to them. [Cases] lists them with the model each claims to follow; the
// package's tests measure which ones budgettest catches, and show, by
// driving each budget next to its model, that every one is a real bug.
//
// Nothing here is for use: every budget in this package is wrong on purpose.
package wild

// preemptHook, nil outside this package's tests, marks the instant inside a
// call where another goroutine can slip in. The concurrency mutants call
// preempt there; a test sets the hook to hold one call at that instant while
// another runs, which forces the interleaving that breaks the budget. With
// the hook nil, preempt does nothing and the budget is as shipped.
var preemptHook func()

func preempt() {
	if h := preemptHook; h != nil {
		h()
	}
}

// floorDiv returns a / b rounded towards negative infinity; b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// floorMod returns a mod b in [0, b); b > 0.
func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

const nsPerSec = int64(1_000_000_000)

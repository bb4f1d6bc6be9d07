// Package naive is a retry budget with no synchronization at all, for the
// instrument package's end-to-end test of Config.Fields: its tokens are a
// plain int64 that Retry reads, checks and decrements and Success
// increments, from any goroutine. Without Fields the rewriter finds
// nothing to rewrite here.
package naive

import "github.com/retrybudget/retrybudget/budget"

// Naive grants a retry for cost tokens and earns 1 token per success.
type Naive struct {
	tokens int64
	cost   int64
}

var _ budget.Budget = (*Naive)(nil)

// New returns a budget of the given tokens whose retries cost 5.
func New(tokens int64) *Naive { return &Naive{tokens: tokens, cost: 5} }

// Request does nothing: first attempts are free.
func (n *Naive) Request() {}

// Retry grants a retry if cost tokens are left: a check, then an act.
func (n *Naive) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	c := n.cost
	if n.tokens < c {
		return false
	}
	n.tokens -= c
	return true
}

// Success earns a token: a read, then a write.
func (n *Naive) Success(budget.Kind) {
	n.tokens++
}

// Tokens returns the tokens left.
func (n *Naive) Tokens() int64 { return n.tokens }

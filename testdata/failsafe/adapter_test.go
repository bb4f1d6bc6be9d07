package failsafe

import (
	"testing"

	fsbudget "github.com/failsafe-go/failsafe-go/budget"

	"github.com/retrybudget/retrybudget/budget"
)

// permits is the part of failsafe-go's budget that its retry executor calls
// (failsafe-go's internal.Budget): the concrete budget has these methods,
// exported, though the package's Budget interface shows only Rate.
type permits interface {
	RecordExecution()
	ReleaseExecution()
	TryAcquirePermit() bool
	ReleasePermit()
}

// inFlight adapts failsafe-go's budget to budget.InFlightBudget as its
// retry executor (retrypolicy, v0.9.8) uses it: an execution is recorded
// when a call starts and released when it ends; a permit is taken for a
// retry and released when the retry's attempt returns.
type inFlight struct{ p permits }

func (a inFlight) permits() permits { return a.p }

func (a inFlight) Request() { a.p.RecordExecution() }
func (a inFlight) Retry(k budget.Kind) bool {
	return k.IsRetry() && a.p.TryAcquirePermit()
}
func (a inFlight) Success(budget.Kind) {}
func (a inFlight) AttemptEnd(k budget.Kind) {
	if k.IsRetry() {
		a.p.ReleasePermit()
	}
}
func (a inFlight) CallEnd() { a.p.ReleaseExecution() }

// naive is the adapter a user writes first, with budget.Budget's three
// methods: a success is the only news of an end, so a call that fails
// keeps its execution, and a retry that fails keeps its permit.
type naive struct{ p permits }

func (a naive) Request()                 { a.p.RecordExecution() }
func (a naive) Retry(k budget.Kind) bool { return k.IsRetry() && a.p.TryAcquirePermit() }
func (a naive) Success(k budget.Kind) {
	if k.IsRetry() {
		a.p.ReleasePermit()
	}
	a.p.ReleaseExecution()
}

// newPermits builds failsafe-go's budget with its defaults (maxRate 0.2,
// minConcurrency 3).
func newPermits(t *testing.T) permits {
	t.Helper()
	p, ok := fsbudget.New().(permits)
	if !ok {
		t.Fatalf("failsafe-go's budget %T no longer has the methods its retry executor calls", fsbudget.New())
	}
	return p
}

func (a naive) permits() permits { return a.p }

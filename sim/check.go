package sim

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// AmplificationConfig is the outage CheckAmplification runs: 10 clients × 5
// requests a second, 3 attempts, 5s healthy, 30s at 100% errors, 5s of
// recovery.
var AmplificationConfig = Config{Clients: 10, Rate: 5, Attempts: 3, Healthy: 5 * time.Second,
	Outage: 30 * time.Second, Recovery: 5 * time.Second, ErrorRate: 1, Seed: 1}

// CheckAmplification runs AmplificationConfig twice, once with each client
// on a budget from newBudget and once on the model m itself (stepped as a
// budget), and returns an error if the budgets granted more retries than
// the model did. Under a 100% outage nothing refills a budget but time, so
// the model's grants are the most a correct budget may grant. It catches a
// budget made per call site instead of shared (N caps multiply) and a
// refund that keeps the budget from draining. It also returns both runs.
func CheckAmplification[S any](t *testing.T, newBudget func(budget.Clock) budget.Budget, m model.Model[S]) (got, want Result, err error) {
	t.Helper()
	c := AmplificationConfig
	c.NewBudget = func(clock budget.Clock) budget.Budget { return &modelBudget[S]{m: m, s: m.Init(), clock: clock} }
	want = Run(t, c)
	c.NewBudget = newBudget
	got = Run(t, c)
	if got.Granted > want.Granted {
		err = fmt.Errorf("under a 100%% outage the budgets granted %d retries (amplification %.3fx) where the model grants %d (%.3fx): the budget does not bound the load",
			got.Granted, got.Amplification, want.Granted, want.Amplification)
	}
	return got, want, err
}

// modelBudget steps a model as a budget, moving its clock to the budget
// clock's reading before every operation.
type modelBudget[S any] struct {
	mu    sync.Mutex
	m     model.Model[S]
	s     S
	clock budget.Clock
	last  time.Duration
}

func (b *modelBudget[S]) step(op model.Op) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now := b.clock.Now(); now != b.last {
		b.s, _ = b.m.Step(b.s, model.OpAdvance(now-b.last))
		b.last = now
	}
	var granted bool
	b.s, granted = b.m.Step(b.s, op)
	return granted
}

func (b *modelBudget[S]) Request()                 { b.step(model.OpRequest) }
func (b *modelBudget[S]) Retry(k budget.Kind) bool { return b.step(model.OpRetry(model.Kind(k))) }
func (b *modelBudget[S]) Success(k budget.Kind)    { b.step(model.OpSuccess(model.Kind(k))) }

package linearizability

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/sched"
	"github.com/retrybudget/retrybudget/model"
)

func BenchmarkZZRatio(b *testing.B) {
	if !sched.Instrumented() {
		b.Skip("needs rewrite")
	}
	cfg := budget.RatioConfig{Ratio: 0.2, Window: 10 * time.Second, Slots: 10, Reserve: 100}
	s := Scenario{
		Before:     slices.Repeat([]model.Op{model.OpRetry(model.Transient)}, 99),
		Goroutines: [][]model.Op{{model.OpRetry(model.Transient), model.OpRetry(model.Transient)}, {model.OpRetry(model.Throttled), model.OpSuccess(model.Transient)}},
	}
	newBudget := func(c budget.Clock) budget.Budget {
		cfg := cfg
		cfg.Clock = c
		r, err := budget.NewRatio(cfg)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	var schedules, choices, steps int
	for b.Loop() {
		rep, err := exhaust(context.Background(), s, newBudget, preemptionBound, 20000, false,
			func(h model.History, r sched.Report) bool {
				choices += len(r.Choices)
				steps += len(r.Options.Schedule)
				return false
			})
		if err != nil {
			b.Fatal(err)
		}
		schedules = rep.Schedules
		b.Logf("%+v", rep)
	}
	b.ReportMetric(float64(schedules), "schedules/op")
	b.ReportMetric(float64(choices)/float64(schedules*b.N), "choices/run")
	b.ReportMetric(float64(steps)/float64(schedules*b.N), "steps/run")
	b.ReportMetric(float64(schedules*b.N)/b.Elapsed().Seconds(), "schedules/s")
}

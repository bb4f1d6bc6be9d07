package model_test

import (
	"fmt"
	"time"

	"github.com/retrybudget/retrybudget/model"
)

func ExampleTokenBucket_Step() {
	m := model.AWS()
	s := m.Init()
	for _, op := range []model.Op{
		model.OpRetry(model.Transient),
		model.OpRetry(model.Transient),
		model.OpSuccess(model.Transient),
	} {
		var granted bool
		s, granted = m.Step(s, op)
		fmt.Println(model.Describe(op, granted), "=>", m.DescribeState(s))
	}
	// Output:
	// retry(transient) -> granted => tokens=486
	// retry(transient) -> granted => tokens=472
	// success(transient) => tokens=486
}

func ExampleRatio_Step() {
	m := model.SRE()
	s := m.Init()
	for range 20 {
		s, _ = m.Step(s, model.OpRequest)
	}
	s, _ = m.Step(s, model.OpAdvance(1500*time.Millisecond))
	for range 4 {
		var granted bool
		s, granted = m.Step(s, model.OpRetry(model.Throttled))
		fmt.Print(granted, " ")
	}
	fmt.Println(m.DescribeState(s))
	// Output: true true true false requests=20 retries=3 now=1.5s
}

// Finagle's default RetryBudget (com.twitter.finagle.service.RetryBudget's
// apply(): ttl 10 s, minRetriesPerSec 10, percentCanRetry 0.2): 20% of the
// requests of the last 10 s, plus a Reserve of minRetriesPerSec × ttl = 100
// retries. tower's TpsBudget::default() has the same numbers. budget's
// ExampleRatio_finagle runs it as a budget.RatioConfig.
func ExampleRatio_finagle() {
	m := model.Ratio{PPM: 200_000, Window: 10 * time.Second, Slots: 10, Reserve: 100}
	fmt.Println("with no traffic:", granted(m, m.Init(), model.Transient))
	fmt.Println("after 1000 requests:", granted(m, after(m, repeat(model.OpRequest, 1000)...), model.Transient))
	// Output:
	// with no traffic: 100
	// after 1000 requests: 300
}

func ExampleThrottle_Step() {
	m := model.Throttle{Max: 3_000, Ratio: 500} // 3 tokens, ratio 0.5
	s := m.Init()
	s, a := m.Step(s, model.OpRetry(model.Transient))
	s, b := m.Step(s, model.OpRetry(model.Transient))
	fmt.Println(a, b, m.DescribeState(s))
	// Output: true false tokens=1
}

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

func ExampleThrottle_Step() {
	m := model.Throttle{Max: 3_000, Ratio: 500} // 3 tokens, ratio 0.5
	s := m.Init()
	s, a := m.Step(s, model.OpRetry(model.Transient))
	s, b := m.Step(s, model.OpRetry(model.Transient))
	fmt.Println(a, b, m.DescribeState(s))
	// Output: true false tokens=1
}

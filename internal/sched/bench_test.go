package sched_test

import (
	"sync/atomic"
	"testing"

	"github.com/retrybudget/retrybudget/internal/sched"
)

// The cost of a hook outside a controlled run, against the operation
// alone, in one binary:
//
//	go test -run '^$' -bench Hook ./yield
func BenchmarkHook(b *testing.B) {
	var n atomic.Int64
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n.Add(1)
		}
	})
	b.Run("hooked", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sched.P(&n).Add(1)
		}
	})
}

// The cost of a yield point inside a controlled run: two goroutines make
// b.N/2 points each (past the default step bound when b.N is large, so
// the bound is raised); PCT of depth 1 never switches, the random walk
// switches at about half of them.
func BenchmarkControlledPoint(b *testing.B) {
	for _, st := range []sched.Strategy{sched.PCT(1), sched.Walk()} {
		b.Run(st.String(), func(b *testing.B) {
			var n atomic.Int64
			f := func() {
				for range b.N / 2 {
					sched.P(&n).Add(1)
				}
			}
			b.ResetTimer()
			sched.Run(sched.Options{Seed: 1, Strategy: st, MaxSteps: b.N + 16}, f, f)
		})
	}
}

package budget_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
)

// hammer runs f on many goroutines released together and waits for them.
func hammer(workers, perWorker int, f func(worker, i int)) {
	var start, done sync.WaitGroup
	start.Add(1)
	for w := range workers {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			for i := range perWorker {
				f(w, i)
				if i%7 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	start.Done()
	done.Wait()
}

// Under contention no budget grants more than it holds. These are quick
// conservation checks for go test -race; the linearizability check is the
// thorough one.
func TestConcurrentNoOverspend(t *testing.T) {
	const workers, perWorker = 8, 2000
	t.Run("TokenBucket", func(t *testing.T) {
		b := newBucket(t, budget.DefaultTokenBucketConfig())
		var granted, credited atomic.Int64
		hammer(workers, perWorker, func(w, i int) {
			if i%5 == 0 {
				b.Success(budget.FirstAttempt)
				credited.Add(1000)
			}
			if b.Retry(budget.Transient) {
				granted.Add(14_000)
			}
		})
		// Granted cost can be at most the starting balance plus credits,
		// and the balance left accounts for the difference.
		left := int64(b.Available() * 1000)
		if g, c := granted.Load(), credited.Load(); g > 500_000+c || left < 0 || left > 500_000 {
			t.Errorf("granted %d milli-tokens with 500000 + %d credited, %d left", g, c, left)
		}
	})
	t.Run("TokenBucketExact", func(t *testing.T) {
		// Without credits, every token is spent exactly once.
		b := newBucket(t, budget.TokenBucketConfig{Capacity: 1000, TransientCost: 1, ThrottledCost: 1})
		var granted atomic.Int64
		hammer(workers, perWorker, func(int, int) {
			if b.Retry(budget.Transient) {
				granted.Add(1)
			}
		})
		if g := granted.Load(); g != 1000 || b.Available() != 0 {
			t.Errorf("granted %d retries from 1000 tokens, %v left; want 1000 and 0", g, b.Available())
		}
	})
	t.Run("Ratio", func(t *testing.T) {
		c := budget.DefaultRatioConfig()
		c.Clock = new(budget.ManualClock) // one window throughout
		b := newRatio(t, c)
		var granted, requests atomic.Int64
		hammer(workers, perWorker, func(w, i int) {
			b.Request()
			requests.Add(1)
			if b.Retry(budget.Throttled) {
				granted.Add(1)
			}
		})
		// Retries that asked while requests lagged were denied; drain
		// what is left. In all, exactly 10% of the requests are granted.
		for b.Retry(budget.Transient) {
			granted.Add(1)
		}
		if g, want := granted.Load(), requests.Load()/10; g != want {
			t.Errorf("granted %d retries for %d requests, want exactly %d", g, requests.Load(), want)
		}
	})
	t.Run("Throttle", func(t *testing.T) {
		b := newThrottle(t, 100, 1)
		var granted atomic.Int64
		hammer(workers, perWorker, func(w, i int) {
			if b.Retry(budget.Transient) {
				granted.Add(1)
			}
		})
		// From 100 tokens, the grants are at 99 down to 51: exactly 49.
		if g := granted.Load(); g != 49 || b.Available() != 0 {
			t.Errorf("granted %d retries, %v tokens left; want 49 and 0", g, b.Available())
		}
	})
}

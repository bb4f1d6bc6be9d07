package thirdparty

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
)

// TestThrottledStaleRead pins throttled's stale read, deterministically:
// memstore's GetWithTime reads the clock (memstore.go:67) before it loads
// the key's theoretical arrival time (memstore.go:68–74), and RateLimitCtx
// decides with the two (rate.go:197–233). Here a call reads t_a and is
// held there (the store's clock is the test's, through SetTimeNow) while
// nine calls at t_b = t_a + 1µs take nine of the ten tokens; released, it
// loads their tat and, at t_a, finds newTat − t_a = 10·T + 1µs beyond the
// tolerance of 10·T: denied. A tenth call at t_b, after it returned, is
// granted. Ten tokens, ten calls overlapping or before the tenth, one
// denied: no order of these calls explains that (before the nine grants
// the bucket was full, after any of them it held a token).
func TestThrottledStaleRead(t *testing.T) {
	ms, err := memstore.New(65536)
	if err != nil {
		t.Fatal(err)
	}
	ta := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tb := ta.Add(time.Microsecond)
	var mu sync.Mutex
	now := ta
	read, release := make(chan struct{}), make(chan struct{})
	hold := true
	ms.SetTimeNow(func() time.Time {
		mu.Lock()
		n, h := now, hold
		hold = false
		mu.Unlock()
		if h { // the first reading: the delayed call's
			close(read)
			<-release
		}
		return n
	})
	l, err := throttled.NewGCRARateLimiterCtx(throttled.WrapStoreWithContext(ms), throttled.RateQuota{MaxRate: throttled.PerSec(10), MaxBurst: 9})
	if err != nil {
		t.Fatal(err)
	}
	take := func() bool {
		limited, _, err := l.RateLimitCtx(context.Background(), "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		return !limited
	}

	delayed := make(chan bool)
	go func() { delayed <- take() }()
	<-read // it has read t_a
	mu.Lock()
	now = tb
	mu.Unlock()
	for i := range 9 {
		if !take() {
			t.Fatalf("call %d at t_b denied", i+1)
		}
	}
	close(release)
	if <-delayed {
		t.Fatal("the call that read t_a was granted: the stale read is gone")
	}
	if !take() {
		t.Fatal("the tenth call at t_b was denied: the bucket held a token the delayed call was refused")
	}
}

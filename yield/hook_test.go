package yield_test

import (
	"sync"
	"testing"

	"github.com/retrybudget/retrybudget/yield"
)

// Outside a controlled run, each hook does what the operation it stands
// for does.
func TestHooksOutsideAControlledRun(t *testing.T) {
	var mu sync.Mutex
	yield.Hook.M(&mu).Lock()
	if mu.TryLock() {
		t.Fatal("yield.Hook.M(&mu).Lock() did not lock mu")
	}
	yield.Hook.M(&mu).Unlock()
	yield.Hook.Point()
	ch := make(chan int, 1)
	yield.Send(ch, 7)
	r := yield.R(ch)
	if i := yield.Hook.Select(false, r); i != 0 || r.V != 7 {
		t.Errorf("Select = %d with %d received, want case 0 with 7", i, r.V)
	}
	var once sync.Once
	n := 0
	yield.Hook.O(&once).Do(func() { n++ })
	yield.Hook.O(&once).Do(func() { n++ })
	var wg sync.WaitGroup
	yield.Hook.WG(&wg).Go(func() { n++ })
	yield.Hook.WG(&wg).Wait()
	if n != 2 {
		t.Errorf("n = %d after a Once done twice and one WaitGroup goroutine, want 2", n)
	}
}

package yield_test

import (
	"sync"
	"testing"

	"github.com/retrybudget/retrybudget/yield"
)

// Code that called the hooks by hand, before they became methods of Hook,
// still compiles and does what the operations do outside a controlled run.
func TestDeprecatedHooksStillWork(t *testing.T) {
	var mu sync.Mutex
	yield.M(&mu).Lock()
	if mu.TryLock() {
		t.Fatal("yield.M(&mu).Lock() did not lock mu")
	}
	yield.M(&mu).Unlock()
	yield.Point()
	ch := make(chan int, 1)
	yield.Send(ch, 7)
	r := yield.R(ch)
	if i := yield.Select(false, r); i != 0 || r.V != 7 {
		t.Errorf("Select = %d with %d received, want case 0 with 7", i, r.V)
	}
	var once sync.Once
	n := 0
	yield.O(&once).Do(func() { n++ })
	yield.O(&once).Do(func() { n++ })
	var wg sync.WaitGroup
	yield.WG(&wg).Go(func() { n++ })
	yield.WG(&wg).Wait()
	if n != 2 {
		t.Errorf("n = %d after a Once done twice and one WaitGroup goroutine, want 2", n)
	}
}

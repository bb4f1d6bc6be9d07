package classes

import (
	"math"
	"sync"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// FloatRatio is a sliding-window ratio budget, under a mutex, whose
// allowance is computed in float64: the share is kept as a float64 fraction
// (PPM / 1e6) and a retry is granted while the retries in the window, this
// one included, are at most max(Floor, ⌊share × requests⌋), the product
// taken in float64 and truncated with math.Floor.
//
// Class 1, ratio family (model.Ratio{PPM: 290_000, Window: 10 * time.Second,
// Slots: 10, Floor: 3}: 29% of the requests of the last 10 s, at least 3).
//
// Bug: 0.29 is not a float64; the nearest one is below it, and 0.29 × 100
// rounds to 28.999999999999996, so with 100 requests in the window (or 200,
// 300, ... some of them) the budget allows 28 retries where the model
// allows 29. For fewer than 100 requests in the window the truncated
// product is always the model's (TestEvidence/FloatRatio checks every count
// below 100, and lists the counts up to 100,000 where the two differ).
//
// The shortest sequence that parts it from its model is therefore a long
// one: 100 requests in one window, after which Available reports 28 where
// the model's balance is 29 (operation 100), then 28 retries, both grant,
// and the 29th retry (operation 129), which the model grants and the budget
// denies (an under-grant). Any sequence of 99 operations or fewer answers
// and balances as the model does.
type FloatRatio struct {
	share float64
	floor float64
	clock budget.Clock

	mu sync.Mutex
	w  window
}

// NewFloatRatio returns an empty FloatRatio with m's parameters (m.Reserve
// must be 0) reading clock.
func NewFloatRatio(m model.Ratio, clock budget.Clock) *FloatRatio {
	if m.Reserve != 0 {
		panic("FloatRatio: no reserve")
	}
	return &FloatRatio{share: float64(m.PPM) / ppm, floor: float64(m.Floor), clock: clock, w: newWindow(m, clock.Now())}
}

// limit returns the retries the window allows with reqs requests in it.
func (r *FloatRatio) limit(reqs int64) float64 {
	return math.Max(r.floor, math.Floor(r.share*float64(reqs)))
}

// Request counts a request.
func (r *FloatRatio) Request() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.w.observe(r.clock.Now())
	r.w.addReq()
}

// Retry grants and counts a retry while the window allows one more.
func (r *FloatRatio) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.w.observe(r.clock.Now())
	if float64(r.w.tries+1) > r.limit(r.w.reqs) {
		return false
	}
	r.w.addRetry()
	return true
}

// Success does nothing.
func (r *FloatRatio) Success(budget.Kind) {}

// Available returns how many more retries the window would grant now.
func (r *FloatRatio) Available() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs, tries := r.w.peek(r.clock.Now())
	return math.Max(r.limit(reqs)-float64(tries), 0)
}

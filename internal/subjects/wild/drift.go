package wild

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// FloatDriftBucket is a token bucket whose balance is a float64 of tokens
// (balance drift: 0.3 − 0.1 − 0.1 is 0.09999999999999998, which no longer
// pays a retry of 0.1 that the model's milli-tokens still pay).
type FloatDriftBucket struct {
	capacity, transient, throttled, bonus float64

	mu     sync.Mutex
	tokens float64
}

// NewFloatDriftBucket returns a full bucket; quantities are in tokens.
func NewFloatDriftBucket(capacity, transient, throttled, bonus float64) *FloatDriftBucket {
	return &FloatDriftBucket{capacity: capacity, transient: transient, throttled: throttled, bonus: bonus, tokens: capacity}
}

// Request does nothing.
func (b *FloatDriftBucket) Request() {}

// Retry withdraws the cost of k if the balance covers it.
func (b *FloatDriftBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	cost := b.transient
	if k == budget.Throttled {
		cost = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens < cost {
		return false
	}
	b.tokens -= cost
	return true
}

// Success refunds a retry's cost, or deposits the bonus, up to capacity.
func (b *FloatDriftBucket) Success(k budget.Kind) {
	credit := b.bonus
	switch k {
	case budget.Transient:
		credit = b.transient
	case budget.Throttled:
		credit = b.throttled
	}
	b.mu.Lock()
	b.tokens = math.Min(b.tokens+credit, b.capacity)
	b.mu.Unlock()
}

// Available returns the balance in tokens.
func (b *FloatDriftBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tokens
}

// TruncatedRefillBucket is a refilling token bucket that converts each
// elapsed interval to whole milli-tokens and drops the remainder (balance
// drift: many short intervals refill less than one long one).
type TruncatedRefillBucket struct {
	capacity, transient, throttled, bonus, perSec int64 // milli-tokens, and milli-tokens a second
	clock                                         budget.Clock

	mu    sync.Mutex
	milli int64
	last  time.Duration
}

// NewTruncatedRefillBucket returns a full bucket (milli-tokens) refilling
// perSec milli-tokens a second.
func NewTruncatedRefillBucket(capacity, transient, throttled, bonus, perSec int64, clock budget.Clock) *TruncatedRefillBucket {
	return &TruncatedRefillBucket{capacity: capacity, transient: transient, throttled: throttled, bonus: bonus,
		perSec: perSec, clock: clock, milli: capacity, last: clock.Now()}
}

// refilled returns the balance at now and the instant it is as of.
func (b *TruncatedRefillBucket) refilled(now time.Duration) (int64, time.Duration) {
	if now <= b.last {
		return b.milli, b.last
	}
	elapsed := uint64(now) - uint64(b.last)
	missing := b.capacity - b.milli
	if elapsed >= uint64((missing*nsPerSec+b.perSec-1)/b.perSec) {
		return b.capacity, now
	}
	return b.milli + int64(elapsed)*b.perSec/nsPerSec, now
}

// Request does nothing.
func (b *TruncatedRefillBucket) Request() {}

// Retry refills, then withdraws the cost of k if the balance covers it.
func (b *TruncatedRefillBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	cost := b.transient
	if k == budget.Throttled {
		cost = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.milli, b.last = b.refilled(b.clock.Now())
	if b.milli < cost {
		return false
	}
	b.milli -= cost
	return true
}

// Success refills, then credits the refund or the bonus, up to capacity.
func (b *TruncatedRefillBucket) Success(k budget.Kind) {
	credit := b.bonus
	switch k {
	case budget.Transient:
		credit = b.transient
	case budget.Throttled:
		credit = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.milli, b.last = b.refilled(b.clock.Now())
	b.milli = min(b.milli+credit, b.capacity)
}

// Available returns the balance in tokens as of now.
func (b *TruncatedRefillBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, _ := b.refilled(b.clock.Now())
	return float64(m) / 1000
}

// RoundedBonusBucket is a token bucket kept in hundredths of a token, so a
// bonus of 0.125 is rounded to 0.13 (balance drift: every successful first
// attempt credits 5 milli-tokens too many).
type RoundedBonusBucket struct {
	capacity, transient, throttled, bonus int64 // centi-tokens
	centi                                 atomic.Int64
}

// NewRoundedBonusBucket returns a full bucket; quantities are in tokens.
func NewRoundedBonusBucket(capacity, transient, throttled, bonus float64) *RoundedBonusBucket {
	centi := func(x float64) int64 { return int64(math.Round(x * 100)) }
	b := &RoundedBonusBucket{capacity: centi(capacity), transient: centi(transient), throttled: centi(throttled), bonus: centi(bonus)}
	b.centi.Store(b.capacity)
	return b
}

// Request does nothing.
func (b *RoundedBonusBucket) Request() {}

// Retry withdraws the cost of k if the balance covers it.
func (b *RoundedBonusBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	cost := b.transient
	if k == budget.Throttled {
		cost = b.throttled
	}
	for {
		old := b.centi.Load()
		if old < cost {
			return false
		}
		if b.centi.CompareAndSwap(old, old-cost) {
			return true
		}
	}
}

// Success refunds a retry's cost, or deposits the bonus, up to capacity.
func (b *RoundedBonusBucket) Success(k budget.Kind) {
	credit := b.bonus
	switch k {
	case budget.Transient:
		credit = b.transient
	case budget.Throttled:
		credit = b.throttled
	}
	for {
		old := b.centi.Load()
		if b.centi.CompareAndSwap(old, min(old+credit, b.capacity)) {
			return
		}
	}
}

// Available returns the balance in tokens.
func (b *RoundedBonusBucket) Available() float64 { return float64(b.centi.Load()) / 100 }

// FloatRatio is a sliding-window ratio budget that computes its allowance as
// int64(float64(requests) × ratio) (balance drift: 100 × 0.29 is
// 28.999999999999996, so 100 requests allow 28 retries, not 29).
type FloatRatio struct {
	ratio       float64
	width, n    int64
	floor       int64
	clock       budget.Clock
	mu          sync.Mutex
	seen        int64
	slot        []int64 // the slot number each entry holds
	reqs, tries []int64
}

// NewFloatRatio returns an empty budget of ratio over window in slots.
func NewFloatRatio(ratio float64, window time.Duration, slots, floor int64, clock budget.Clock) *FloatRatio {
	r := &FloatRatio{ratio: ratio, width: int64(window) / slots, n: slots, floor: floor, clock: clock,
		seen: int64(clock.Now()), slot: make([]int64, slots), reqs: make([]int64, slots), tries: make([]int64, slots)}
	for i := range r.slot {
		r.slot[i] = math.MinInt64 // holds nothing
	}
	return r
}

// entry returns the index of the current slot, cleared if it held an older one.
func (r *FloatRatio) entry() (int, int64) {
	if now := int64(r.clock.Now()); now > r.seen {
		r.seen = now
	}
	h := floorDiv(r.seen, r.width)
	i := int(floorMod(h, r.n))
	if r.slot[i] != h {
		r.slot[i], r.reqs[i], r.tries[i] = h, 0, 0
	}
	return i, h
}

// Request counts a request.
func (r *FloatRatio) Request() {
	r.mu.Lock()
	i, _ := r.entry()
	r.reqs[i]++
	r.mu.Unlock()
}

// Retry grants a retry while retries stay within max(floor, ratio × requests).
func (r *FloatRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	i, h := r.entry()
	var reqs, tries int64
	for j, s := range r.slot {
		if s != math.MinInt64 && uint64(h)-uint64(s) < uint64(r.n) {
			reqs, tries = reqs+r.reqs[j], tries+r.tries[j]
		}
	}
	if tries+1 > r.floor && tries+1 > int64(float64(reqs)*r.ratio) {
		return false
	}
	r.tries[i]++
	return true
}

// Success does nothing.
func (r *FloatRatio) Success(budget.Kind) {}

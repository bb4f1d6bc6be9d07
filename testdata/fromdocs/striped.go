package fromdocs

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// StripedModel is the rule StripedInFlight follows: Envoy's rule with a
// budget_percent of 45% and a min_retry_concurrency of 5.
var StripedModel = model.InFlight{PPM: 450_000, MinConcurrency: 5, Rule: model.Envoy}

const stripes = 4

// stripeCap is the most calls one stripe takes on the fast path, so that
// the stripes together stay within countMax while the fast path runs.
const stripeCap = countMax / stripes

type stripe struct {
	mu             sync.Mutex
	calls, retries int64
	_              [40]byte // keep stripes on separate cache lines
}

// StripedInFlight is an in-flight retry budget with Envoy's rule
// (model.InFlight, Rule Envoy) whose counts are spread over 4 stripes,
// each with its own mutex, chosen round-robin by an atomic ticket (never
// at random). Request, CallEnd and AttemptEnd usually lock one stripe;
// Retry, which needs the totals, locks every stripe in index order and
// sums them. An end that finds its stripe empty, and a Request whose
// stripe is full (or while some stripe is over stripeCap), take the slow
// path: every stripe locked, the totals checked, one stripe changed.
//
// Linearizability: the state is the sum of the stripes. A fast-path call
// changes one stripe under its lock; its decision is valid at that instant
// because an end finds a count > 0 in its stripe (so the total is > 0),
// and a Request's stripe is below stripeCap while every other one is at
// most stripeCap (over is false, and only a caller holding every lock
// changes it), so the total stays within 2^32-1. A slow-path call and a
// Retry hold every lock, so no stripe changes while they read and decide:
// they take effect at one instant on the exact totals. Changes of
// different stripes commute, so ordering the fast-path calls by their
// updates gives a sequential history with the same answers.
type StripedInFlight struct {
	ppm, min int64
	ticket   atomic.Uint32
	s        [stripes]stripe
	over     bool // some stripe holds more than stripeCap calls; guarded by every stripe's lock
}

var _ budget.InFlightBudget = (*StripedInFlight)(nil)

// NewStriped returns a budget with nothing in flight following m, which
// must have Rule Envoy.
func NewStriped(m model.InFlight) *StripedInFlight {
	if m.Rule != model.Envoy {
		panic("fromdocs: StripedInFlight implements Envoy's rule only")
	}
	return &StripedInFlight{ppm: m.PPM, min: m.MinConcurrency}
}

func (b *StripedInFlight) pick() *stripe { return &b.s[b.ticket.Add(1)%stripes] }

func (b *StripedInFlight) lockAll() {
	for i := range b.s {
		b.s[i].mu.Lock()
	}
}

func (b *StripedInFlight) unlockAll() {
	for i := len(b.s) - 1; i >= 0; i-- {
		b.s[i].mu.Unlock()
	}
}

// totals returns the calls and retries in flight; every lock must be held.
func (b *StripedInFlight) totals() (calls, retries int64) {
	for i := range b.s {
		calls += b.s[i].calls
		retries += b.s[i].retries
	}
	return calls, retries
}

// Request counts a call in flight.
func (b *StripedInFlight) Request() {
	s := b.pick()
	s.mu.Lock()
	if !b.over && s.calls < stripeCap {
		s.calls++
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	b.lockAll()
	defer b.unlockAll()
	if calls, _ := b.totals(); calls < countMax {
		least := &b.s[0]
		for i := range b.s {
			if b.s[i].calls < least.calls {
				least = &b.s[i]
			}
		}
		least.calls++
	}
	b.over = false
	for i := range b.s {
		b.over = b.over || b.s[i].calls > stripeCap
	}
}

// end takes one from the count field picks, on the stripe chosen if it
// has one, or on any stripe that has one; with none in flight it does
// nothing.
func (b *StripedInFlight) end(field func(*stripe) *int64) {
	s := b.pick()
	s.mu.Lock()
	if p := field(s); *p > 0 {
		*p--
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	b.lockAll()
	defer b.unlockAll()
	for i := range b.s {
		if p := field(&b.s[i]); *p > 0 {
			*p--
			return
		}
	}
}

// CallEnd ends a call in flight, if any.
func (b *StripedInFlight) CallEnd() { b.end(func(s *stripe) *int64 { return &s.calls }) }

// AttemptEnd ends a retry in flight, if kind is a retry kind and one is.
func (b *StripedInFlight) AttemptEnd(kind budget.Kind) {
	if kind.IsRetry() {
		b.end(func(s *stripe) *int64 { return &s.retries })
	}
}

// Retry grants a retry while the retries in flight are fewer than
// max(MinConcurrency, ⌊PPM × calls / 1e6⌋), and counts it in flight.
func (b *StripedInFlight) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	s := b.pick()
	b.lockAll()
	defer b.unlockAll()
	calls, retries := b.totals()
	if retries >= countMax || (retries >= b.min && retries >= b.ppm*calls/1_000_000) {
		return false
	}
	s.retries++
	return true
}

// Success does nothing.
func (b *StripedInFlight) Success(budget.Kind) {}

// Available returns how many more retries would be granted now.
func (b *StripedInFlight) Available() float64 {
	b.lockAll()
	defer b.unlockAll()
	calls, retries := b.totals()
	limit := min(max(b.ppm*calls/1_000_000, b.min), countMax)
	if retries >= limit {
		return 0
	}
	return float64(limit - retries)
}

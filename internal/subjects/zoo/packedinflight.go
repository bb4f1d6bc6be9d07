package zoo

import (
	"math"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// PackedInFlight is a lock-free Envoy retry_budget configured as Envoy is,
// by a budget_percent and a min_retry_concurrency. Both counts share one
// atomic.Uint64, the retries in flight in the high 32 bits and the calls in
// flight in the low 32, and every change is a compare-and-swap of the
// whole word, so a grant is decided on both counts as they are at one
// instant. A count at 2^32 - 1 stays there; an end with nothing in flight
// is ignored.
type PackedInFlight struct {
	ppm     uint64 // budget_percent × 10,000
	minConc uint64
	word    atomic.Uint64
}

const (
	packedRetry = 1 << 32
	packedCalls = 1<<32 - 1
)

// NewPackedInFlight returns a budget with nothing in flight. percent is
// Envoy's budget_percent, in [0, 100], kept to four decimals.
func NewPackedInFlight(percent float64, minRetryConcurrency uint32) *PackedInFlight {
	return &PackedInFlight{ppm: uint64(math.Round(percent * 10_000)), minConc: uint64(minRetryConcurrency)}
}

func unpack(w uint64) (retries, calls uint64) { return w >> 32, w & packedCalls }

func (b *PackedInFlight) allowed(calls uint64) uint64 {
	return max(b.minConc, b.ppm*calls/1_000_000)
}

// update installs f(old) until a compare-and-swap succeeds; f returns
// false to leave the word as it is.
func (b *PackedInFlight) update(f func(w uint64) (uint64, bool)) bool {
	for {
		old := b.word.Load()
		nu, ok := f(old)
		if !ok {
			return false // linearizes at the Load
		}
		if b.word.CompareAndSwap(old, nu) {
			return true
		}
	}
}

func (b *PackedInFlight) Request() {
	b.update(func(w uint64) (uint64, bool) {
		_, calls := unpack(w)
		return w + 1, calls < inflightMax
	})
}

func (b *PackedInFlight) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	return b.update(func(w uint64) (uint64, bool) {
		retries, calls := unpack(w)
		return w + packedRetry, retries < inflightMax && retries < b.allowed(calls)
	})
}

func (b *PackedInFlight) Success(budget.Kind) {}

func (b *PackedInFlight) AttemptEnd(k budget.Kind) {
	if !k.IsRetry() {
		return
	}
	b.update(func(w uint64) (uint64, bool) {
		retries, _ := unpack(w)
		return w - packedRetry, retries > 0
	})
}

func (b *PackedInFlight) CallEnd() {
	b.update(func(w uint64) (uint64, bool) {
		_, calls := unpack(w)
		return w - 1, calls > 0
	})
}

// Available returns how many more retries would be granted now.
func (b *PackedInFlight) Available() float64 {
	retries, calls := unpack(b.word.Load())
	l := min(b.allowed(calls), inflightMax)
	if retries >= l {
		return 0
	}
	return float64(l - retries)
}

package budget

import (
	"math"
	"sync/atomic"
)

// A Throttle is gRPC's retry throttling (gRFC A6) as a retry budget.
//
// It holds a token count that starts at maxTokens. Every retryable failure
// costs one token (the count never goes below zero), and every successful
// attempt adds tokenRatio tokens (the count never exceeds maxTokens). A retry
// is allowed only while the count, after the failure's token is taken, is
// strictly greater than maxTokens/2. tokenRatio is kept to three decimals, as
// the gRFC specifies.
//
// Unlike the other budgets, a Throttle charges the failure even when it
// denies the retry: [Throttle.Retry] records a retryable failure and then
// answers whether to retry, as gRPC does. A failure after which no retry is
// asked for (the last attempt's, or one the server forbade to retry) takes
// its token through [Throttle.Failed]: a Throttle is a [FailureCounter],
// and [Retrier] tells it of those failures.
//
// Every call is one compare-and-swap loop on one word and allocates nothing.
//
// The zero value denies every retry; use [NewThrottle].
// Most callers want [Throttle.Retry].
//
// Throttle is safe for concurrent use by multiple goroutines.
type Throttle struct {
	max   int64 // milli-tokens
	ratio int64 // milli-tokens per success

	_      cacheLinePad
	tokens atomic.Int64 // milli-tokens
	counts counts
	_      cacheLinePad
}

var _ FailureCounter = (*Throttle)(nil)

// NewThrottle returns a Throttle holding maxTokens tokens, or an error
// wrapping [ErrInvalidConfig]. maxTokens must be in (0, 1000] and tokenRatio
// in [0.001, 1000]; digits of tokenRatio past the third decimal are ignored,
// as gRFC A6 says.
func NewThrottle(maxTokens, tokenRatio float64) (*Throttle, error) {
	max, ok := toMilli(maxTokens)
	if !ok || max <= 0 || max > 1000*milli {
		return nil, configError("Throttle maxTokens", maxTokens, "in (0, 1000]")
	}
	ratio := int64(0)
	// Round to micro-tokens first, so that 0.7 (0.69999...) keeps its third
	// decimal, then drop what is past the third. A ratio of 0 or less (and
	// NaN, which no comparison holds) gives 0, refused below.
	if micro := math.Max(0, math.Round(tokenRatio*1e6)); micro <= 1000*1e6 {
		ratio = int64(micro) / 1000
	}
	if ratio < 1 || ratio > 1000*milli {
		return nil, configError("Throttle tokenRatio", tokenRatio, "in [0.001, 1000]")
	}
	t := &Throttle{max: max, ratio: ratio}
	t.tokens.Store(max)
	return t, nil
}

// Request does nothing.
func (t *Throttle) Request() {}

// Retry takes one token for a retryable failure of the given kind and
// reports whether more than half of maxTokens remain. A kind that is not a
// retry kind is denied and takes nothing.
func (t *Throttle) Retry(kind Kind) bool { return t.counts.count(t.retry(kind)) }

// Stats returns the retries granted and denied so far.
func (t *Throttle) Stats() Stats { return t.counts.stats() }

func (t *Throttle) retry(kind Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	for {
		old := t.tokens.Load()
		n := max(old-milli, 0)
		if n == old || t.tokens.CompareAndSwap(old, n) {
			return 2*n > t.max
		}
	}
}

// Failed takes one token for a retryable failure of the given kind after
// which no retry is asked for ([FailureCounter]): the last attempt's
// failure, or one the server forbade to retry. Its effect on the tokens is
// a denied or granted Retry's; it counts as neither in Stats. A kind that
// is not a retry kind takes nothing.
func (t *Throttle) Failed(kind Kind) { t.retry(kind) }

// Success adds tokenRatio tokens, up to maxTokens, whatever the kind.
func (t *Throttle) Success(Kind) {
	for {
		old := t.tokens.Load()
		n := min(old+t.ratio, t.max)
		if n == old || t.tokens.CompareAndSwap(old, n) {
			return
		}
	}
}

// Available returns the current token count. By the time it returns, other
// goroutines may have changed it; use it for metrics only.
func (t *Throttle) Available() float64 { return fromMilli(t.tokens.Load()) }

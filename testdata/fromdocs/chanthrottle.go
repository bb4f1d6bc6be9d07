package fromdocs

import (
	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// ChanModel is the rule ChanThrottle follows: maxTokens 15.5, tokenRatio
// 0.075.
var ChanModel = model.Throttle{Max: 15_500, Ratio: 75}

// ChanThrottle is gRPC's retry throttling (model.Throttle) whose token
// count lives in a channel of capacity one: a call receives the count
// (which leaves the channel empty, so no other call can have it), works
// on it, and sends the new count back. The channel is the lock and the
// state at once.
//
// Design 10 of this batch: golang.org/x/time/rate was considered and not
// used, since with a positive rate its float64 refill does not follow
// model.TokenBucket's milli-token arithmetic exactly.
//
// Linearizability: exactly one value is ever in flight between the channel
// and the call that took it, so the calls that receive it are totally
// ordered, and each call's read-modify-write happens between its receive
// and its send, inside its own interval. Nothing reads a clock; Request
// changes nothing.
type ChanThrottle struct {
	max, ratio int64
	state      chan int64 // milli-tokens, capacity 1, always holding one value between calls
}

// NewChan returns a full throttle following m.
func NewChan(m model.Throttle) *ChanThrottle {
	t := &ChanThrottle{max: m.Max, ratio: m.Ratio, state: make(chan int64, 1)}
	t.state <- m.Max
	return t
}

// Request does nothing.
func (t *ChanThrottle) Request() {}

// Retry takes one token and reports whether more than half of maxTokens
// remain.
func (t *ChanThrottle) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	n := max(<-t.state-1000, 0)
	t.state <- n
	return 2*n > t.max
}

// Success adds tokenRatio, up to maxTokens.
func (t *ChanThrottle) Success(budget.Kind) {
	t.state <- min(<-t.state+t.ratio, t.max)
}

// Available returns the token count.
func (t *ChanThrottle) Available() float64 {
	n := <-t.state
	t.state <- n
	return float64(n) / 1000
}

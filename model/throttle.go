package model

// Throttle specifies gRPC retry throttling (gRFC A6). Quantities are in
// milli-tokens.
//
// The count starts at Max. Retry(k), for a retry kind, takes 1000 (one
// token) down to a floor of 0 and is granted when what is left is strictly
// more than Max/2. Success(k), whatever k, adds Ratio up to Max. Request
// changes nothing. Nothing observes the clock.
type Throttle struct {
	Max   int64
	Ratio int64
}

// ThrottleState is the state of a Throttle.
type ThrottleState struct {
	Tokens int64 // milli-tokens
}

var _ Model[ThrottleState] = Throttle{}

// Init returns a full count.
func (m Throttle) Init() ThrottleState { return ThrottleState{Tokens: m.Max} }

// Step applies op.
func (m Throttle) Step(s ThrottleState, op Op) (ThrottleState, bool) {
	switch op.Op {
	case Reset:
		return m.ResetState(s), false
	case Retry:
		if !op.Kind.IsRetry() {
			return s, false
		}
		s.Tokens = max(s.Tokens-1000, 0)
		return s, s.Tokens*2 > m.Max
	case Success:
		s.Tokens = min(s.Tokens+m.Ratio, m.Max)
	}
	return s, false
}

// Balance returns the token count of s in milli-tokens.
func (m Throttle) Balance(s ThrottleState) int64 { return s.Tokens }

// Equal reports a == b.
func (m Throttle) Equal(a, b ThrottleState) bool { return a == b }

// Hash hashes s.
func (m Throttle) Hash(s ThrottleState) uint64 { return Hash(s.Tokens) }

// DescribeState describes s as "tokens=7.5".
func (m Throttle) DescribeState(s ThrottleState) string {
	return "tokens=" + formatMilli(s.Tokens)
}

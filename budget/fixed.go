package budget

import (
	"math"
	"strconv"
	"time"
)

// Fractional token counts are kept in milli-tokens: 1 token is 1000 units.
const milli = 1000

// nsPerSecond converts a refill rate per second into units per nanosecond.
const nsPerSecond = int64(time.Second)

// toMilli converts x tokens to milli-tokens, rounding to the nearest unit.
// It reports false when x is NaN, infinite or too large for int64.
func toMilli(x float64) (int64, bool) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, false
	}
	m := math.Round(x * milli)
	if m >= math.MaxInt64 || m <= math.MinInt64 {
		return 0, false
	}
	return int64(m), true
}

// milliRange converts x to milli-tokens and checks lo <= result <= hi,
// returning a ConfigError naming field otherwise.
func milliRange(field string, x float64, lo, hi int64, want string) (int64, error) {
	m, ok := toMilli(x)
	if !ok || m < lo || m > hi {
		return 0, configError(field, x, want)
	}
	return m, nil
}

// fromMilli converts milli-tokens to tokens.
func fromMilli(m int64) float64 { return float64(m) / milli }

// cacheLinePad keeps a hot atomic word away from its neighbours, so that
// writers on one core do not evict the read-only fields other cores read.
type cacheLinePad struct{ _ [64]byte }

// formatMilli formats milli-tokens as a decimal number of tokens.
func formatMilli(m int64) string { return strconv.FormatFloat(fromMilli(m), 'f', -1, 64) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

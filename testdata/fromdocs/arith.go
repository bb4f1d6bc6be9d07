package fromdocs

import (
	"math/bits"
	"time"
)

const nsPerSecond = uint64(time.Second)

// floorDiv returns a / b rounded towards negative infinity; b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// floorMod returns a mod b in [0, b); b > 0.
func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// ratioLimit returns ⌊ppm × reqs / 1e6⌋ + reserve, computed in 128 bits.
func ratioLimit(ppm, reqs, reserve int64) uint64 {
	hi, lo := bits.Mul64(uint64(reqs), uint64(ppm))
	q, _ := bits.Div64(hi, lo, 1_000_000)
	return q + uint64(reserve)
}

// ratioGrants reports whether one more retry fits: retries+1 at most
// max(floor, ⌊ppm × reqs / 1e6⌋ + reserve).
func ratioGrants(ppm, floor, reserve, reqs, retries int64) bool {
	return retries+1 <= floor || uint64(retries+1) <= ratioLimit(ppm, reqs, reserve)
}

// ratioLeft returns max(floor, allowance) - retries, or 0.
func ratioLeft(ppm, floor, reserve, reqs, retries int64) float64 {
	limit := max(uint64(floor), ratioLimit(ppm, reqs, reserve))
	if uint64(retries) >= limit {
		return 0
	}
	return float64(limit - uint64(retries))
}

// observe applies the forward-only rule: it returns the later of seen and
// now, and the nanoseconds from the old seen to it, as an exact unsigned
// distance.
func observe(seen, now time.Duration) (time.Duration, uint64) {
	if now > seen {
		return now, uint64(now) - uint64(seen)
	}
	return seen, 0
}

package fuzz

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/retrybudget/retrybudget/model"
)

// Ops decodes data into operations. Each operation takes one byte, and an
// Advance the bytes of its duration after it:
//
//	b%8 == 0        Request
//	b%8 == 1, 2     Retry(Transient), Retry(Throttled)
//	b%8 == 3, 4, 5  Success(FirstAttempt), Success(Transient), Success(Throttled)
//	b%8 == 6        Retry or Success of the kind b>>4, often not a retry kind
//	b%8 == 7        Advance, by (b>>3)%4: 0 the next byte in ns; 1 the next
//	                2 bytes in ms; 2 the next 4 bytes in µs; 3 the next 8
//	                bytes as a signed int64 in ns
//
// Missing bytes read as zero. Every byte string decodes to some sequence.
func Ops(data []byte) []model.Op {
	var ops []model.Op
	for len(data) > 0 {
		b := data[0]
		data = data[1:]
		switch b % 8 {
		case 0:
			ops = append(ops, model.OpRequest)
		case 1:
			ops = append(ops, model.OpRetry(model.Transient))
		case 2:
			ops = append(ops, model.OpRetry(model.Throttled))
		case 3:
			ops = append(ops, model.OpSuccess(model.FirstAttempt))
		case 4:
			ops = append(ops, model.OpSuccess(model.Transient))
		case 5:
			ops = append(ops, model.OpSuccess(model.Throttled))
		case 6:
			k := model.Kind(b >> 4)
			if b&8 == 0 {
				ops = append(ops, model.OpRetry(k))
			} else {
				ops = append(ops, model.OpSuccess(k))
			}
		case 7:
			var d time.Duration
			d, data = duration((b>>3)%4, data)
			ops = append(ops, model.OpAdvance(d))
		}
	}
	return ops
}

// duration reads a duration in the given encoding from the front of data.
func duration(enc byte, data []byte) (time.Duration, []byte) {
	var buf [8]byte
	n := []int{1, 2, 4, 8}[enc]
	copy(buf[:], data)
	rest := data[min(n, len(data)):]
	switch enc {
	case 0:
		return time.Duration(buf[0]), rest
	case 1:
		return time.Duration(binary.LittleEndian.Uint16(buf[:])) * time.Millisecond, rest
	case 2:
		return time.Duration(binary.LittleEndian.Uint32(buf[:])) * time.Microsecond, rest
	}
	return time.Duration(int64(binary.LittleEndian.Uint64(buf[:]))), rest
}

// Instants decodes data into operations on a ratio window with absolute
// clock readings: each entry is one byte, b%4 == 0 a Request, 1 and 2 a
// Retry(Transient) and Retry(Throttled), and 3 a move of the clock to the
// reading in the next 8 bytes (a signed int64, little-endian). It returns the
// operations, with each move turned into the Advance that reaches it from
// the previous reading, starting at start.
func Instants(start time.Duration, data []byte) []model.Op {
	var ops []model.Op
	now := start
	for len(data) > 0 {
		b := data[0]
		data = data[1:]
		switch b % 4 {
		case 0:
			ops = append(ops, model.OpRequest)
		case 1:
			ops = append(ops, model.OpRetry(model.Transient))
		case 2:
			ops = append(ops, model.OpRetry(model.Throttled))
		case 3:
			var buf [8]byte
			copy(buf[:], data)
			data = data[min(8, len(data)):]
			t := time.Duration(int64(binary.LittleEndian.Uint64(buf[:])))
			ops = append(ops, model.OpAdvance(time.Duration(int64(uint64(t)-uint64(now)))))
			now = t
		}
	}
	return ops
}

// between maps x into [lo, hi] (lo <= hi), spreading the int64 range over
// it, so that most fuzzer inputs are valid parameters.
func between(x, lo, hi int64) int64 {
	span := uint64(hi - lo)
	if span == math.MaxUint64 {
		return x
	}
	return lo + int64(uint64(x)%(span+1))
}

// TokenBucket maps arbitrary numbers onto valid token-bucket parameters (in
// milli-tokens): capacity up to 1,000,000 tokens, costs and bonus up to the
// capacity, refill up to 1,000,000 tokens a second, half of the time none.
func TokenBucket(capacity, transient, throttled, bonus, refill int64, noRefund bool) model.TokenBucket {
	c := between(capacity, 1, 1_000_000_000)
	m := model.TokenBucket{
		Capacity:      c,
		TransientCost: between(transient, 1, c),
		ThrottledCost: between(throttled, 1, c),
		SuccessBonus:  between(bonus, 0, c),
		NoRefund:      noRefund,
	}
	if refill%2 != 0 {
		m.RefillPerSecond = between(refill/2, 1, 1_000_000_000)
	}
	return m
}

// Ratio maps arbitrary numbers onto valid ratio parameters: any positive
// window, 1 to 1024 slots (no more than the window's nanoseconds), any ratio
// from 1 ppm to 1, a floor of 0 to 7.
func Ratio(window int64, slots uint16, ppm uint32, floor uint8) model.Ratio {
	w := between(window, 1, math.MaxInt64)
	return model.Ratio{
		Window: time.Duration(w),
		Slots:  between(int64(slots), 1, min(1024, w)),
		PPM:    between(int64(ppm), 1, 1_000_000),
		Floor:  int64(floor % 8),
	}
}

// Throttle maps arbitrary numbers onto valid throttle parameters: up to
// 1000 tokens, a ratio from 0.001 to 1000 tokens.
func Throttle(max, ratio int64) model.Throttle {
	return model.Throttle{Max: between(max, 1, 1_000_000), Ratio: between(ratio, 1, 1_000_000)}
}

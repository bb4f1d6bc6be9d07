package fuzzops

import (
	"encoding/binary"
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
// Missing bytes read as zero. Every byte string decodes to some sequence,
// of at most MaxOps operations: the rest of a longer input is ignored, so
// that no input makes a fuzz target work for long. [Encode] is the inverse.
func Ops(data []byte) []model.Op {
	var ops []model.Op
	for len(data) > 0 && len(ops) < MaxOps {
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

// MaxOps is the most operations Ops and Instants decode from one input.
const MaxOps = 4096

// Encode returns bytes that Ops decodes to ops, for seeds of a fuzz corpus.
// A Retry or Success of a kind above 15, and a Reset, cannot be encoded:
// Encode panics on them.
func Encode(ops []model.Op) []byte {
	var out []byte
	for _, op := range ops {
		switch {
		case op.Op == model.Request:
			out = append(out, 0)
		case op.Op == model.Retry && op.Kind == model.Transient:
			out = append(out, 1)
		case op.Op == model.Retry && op.Kind == model.Throttled:
			out = append(out, 2)
		case op.Op == model.Success && op.Kind <= model.Throttled:
			out = append(out, 3+byte(op.Kind))
		case op.Op == model.Retry && op.Kind < 16:
			out = append(out, 6|byte(op.Kind)<<4)
		case op.Op == model.Success && op.Kind < 16:
			out = append(out, 6|8|byte(op.Kind)<<4)
		case op.Op == model.Advance:
			out = append(out, 7|3<<3)
			out = binary.LittleEndian.AppendUint64(out, uint64(op.D))
		default:
			panic("fuzz: cannot encode " + op.String())
		}
	}
	return out
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
	for len(data) > 0 && len(ops) < MaxOps {
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

package model

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"testing"
)

// hash is FNV-1a over the words' bytes, least significant first, eight to a
// word.
func TestHashIsFNV1a(t *testing.T) {
	for _, words := range [][]int64{nil, {0}, {1}, {-1}, {math.MinInt64, math.MaxInt64}, {1 << 56, -2, 12345}} {
		f := fnv.New64a()
		for _, w := range words {
			f.Write(binary.LittleEndian.AppendUint64(nil, uint64(w)))
		}
		if got, want := Hash(words...), f.Sum64(); got != want {
			t.Errorf("Hash(%v) = %x, want %x", words, got, want)
		}
	}
}

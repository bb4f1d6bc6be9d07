package fuzzops_test

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "write the seed corpora under testdata/fuzz anew")

// encode writes values in the go test fuzz v1 corpus format.
func encode(vals ...any) []byte {
	var b bytes.Buffer
	b.WriteString("go test fuzz v1\n")
	for _, v := range vals {
		switch v := v.(type) {
		case float64:
			if math.IsNaN(v) {
				fmt.Fprintf(&b, "float64(NaN)\n")
			} else {
				fmt.Fprintf(&b, "float64(%v)\n", v)
			}
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		default:
			fmt.Fprintf(&b, "%T(%v)\n", v, v)
		}
	}
	return b.Bytes()
}

// at encodes a move of the clock to t for fuzzops.Instants.
func at(t time.Duration) []byte {
	b := []byte{3, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.LittleEndian.PutUint64(b[1:], uint64(t))
	return b
}

// adv encodes Advance(d) for fuzzops.Ops, in the 8-byte form.
func adv(d time.Duration) []byte {
	b := []byte{7 | 3<<3, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.LittleEndian.PutUint64(b[1:], uint64(d))
	return b
}

func rep(n int, b ...byte) []byte { return bytes.Repeat(b, n) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

const (
	request   = 0
	retryT    = 1 // Retry(Transient) in both encodings
	retryThr  = 2
	okFirst   = 3
	okT       = 4
	okThr     = 5
	maxInt64  = time.Duration(math.MaxInt64)
	minInt64  = time.Duration(math.MinInt64)
	tenSecond = int64(10 * time.Second)
)

// seeds are the edge cases each target starts from.
var seeds = map[string]map[string][]any{
	"FuzzRatioWindow": {
		"sre-defaults": {tenSecond - 1, uint16(9), uint32(99_999), uint8(3), int64(0),
			cat(rep(50, request), rep(6, retryT), at(9999*time.Millisecond), []byte{retryT}, at(10*time.Second), []byte{retryT, retryT, retryT, retryT})},
		"negative-start": {tenSecond - 1, uint16(9), uint32(99_999), uint8(1), int64(-5 * time.Second),
			cat(rep(20, request), rep(3, retryT), at(-time.Second), rep(3, retryThr), at(3*time.Second), rep(3, retryT))},
		"near-max-int64": {tenSecond - 1, uint16(9), uint32(99_999), uint8(1), int64(maxInt64 - 20*time.Second),
			cat(rep(20, request), rep(3, retryT), at(maxInt64-15*time.Second), rep(3, retryT), at(maxInt64-time.Nanosecond), rep(3, retryT), at(maxInt64), rep(2, retryT))},
		"min-to-max": {int64(6), uint16(6), uint32(999_999), uint8(0), int64(minInt64),
			cat([]byte{request, retryT, retryT}, at(minInt64+3), []byte{request, retryT}, at(maxInt64), []byte{request, retryT, retryT})},
		"backwards": {int64(4*time.Second - 1), uint16(3), uint32(499_999), uint8(0), int64(0),
			cat(rep(4, request), at(2*time.Second), rep(2, request), rep(4, retryT), at(time.Second), rep(2, retryT), at(4*time.Second), rep(2, retryT), at(6*time.Second), []byte{request, request, retryT, retryT})},
		"jump-past-window": {tenSecond - 1, uint16(1023), uint32(99_999), uint8(2), int64(0),
			cat(rep(30, request), rep(4, retryT), at(time.Hour), rep(4, retryT), at(time.Hour+9*time.Second), rep(4, retryT))},
		"one-ns-slots": {int64(4), uint16(4), uint32(999_999), uint8(1), int64(100),
			cat([]byte{request, retryT, retryT}, at(101), []byte{request, retryT}, at(103), []byte{retryT}, at(104), []byte{retryT, retryT}, at(108), []byte{retryT})},
		"uneven-slots": {int64(9), uint16(2), uint32(999_999), uint8(0), int64(-7),
			cat([]byte{request, retryT, retryT}, at(-4), []byte{request, retryT}, at(2), []byte{retryT}, at(5), []byte{request, retryT})},
	},
	"FuzzRatio": {
		"sre-defaults":  {tenSecond - 1, uint16(9), uint32(99_999), uint8(3), cat(rep(50, request), rep(7, retryT), adv(time.Second), rep(3, retryThr), adv(9*time.Second), rep(4, retryT))},
		"invalid-kinds": {tenSecond - 1, uint16(9), uint32(99_999), uint8(3), []byte{request, 6, 6 | 16, 6 | 8 | 112, retryT, okT, okThr, okFirst}},
		"small-steps":   {int64(1000), uint16(9), uint32(499_999), uint8(0), cat(rep(4, request), rep(40, 7, 1, retryT))},
	},
	"FuzzTokenBucket": {
		"aws-drain":      {int64(499_999), int64(13_999), int64(4_999), int64(999), int64(0), false, cat(rep(40, retryT), rep(3, retryThr), []byte{okT, okThr, okFirst}, rep(5, retryT))},
		"seed004-small":  {int64(29_999), int64(13_999), int64(4_999), int64(999), int64(0), false, []byte{retryT, retryT, retryT, okT, retryT, retryT}},
		"seed000-refill": {int64(39_999), int64(999), int64(999), int64(99), int64(2 * 1_000), true, cat(rep(41, retryT), []byte{okT}, adv(900*time.Millisecond), []byte{retryT, retryT}, adv(time.Hour), rep(41, retryThr))},
		"fractions":      {int64(9_999), int64(9_999), int64(0), int64(0), int64(2*777 + 1), false, cat([]byte{retryT}, rep(200, 7, 1, retryT))},
		"far-and-back":   {int64(999_999_999), int64(999_999_999), int64(0), int64(0), int64(2*999_999_999 + 1), false, cat([]byte{retryT}, adv(maxInt64), []byte{retryT}, adv(minInt64), []byte{retryThr, retryT}, adv(-time.Second), []byte{retryThr})},
	},
	"FuzzThrottle": {
		"grpc-example": {int64(9_999), int64(99), cat(rep(6, retryT), []byte{okFirst}, rep(2, retryT), rep(20, okT), rep(6, retryThr))},
		"odd-max":      {int64(2_999), int64(999), []byte{retryT, retryT, okT, retryT, 6, 6 | 32}},
		"floor":        {int64(1_999), int64(499), cat(rep(5, retryT), rep(10, okFirst), rep(3, retryT))},
	},
	"FuzzConfig": {
		"defaults":     {500.0, 14.0, 5.0, 1.0, 0.0, false, 0.1, int64(10 * time.Second), 10, 3, 10.0, 0.1},
		"edges":        {1e6, 0.001, 1e6, 1e6, 1e6, true, 1.0, int64(1), 1, 0, 1000.0, 1000.0},
		"rounding":     {0.0005, 0.0004, 0.0015, -0.0004, 0.0004999, false, 5e-7, int64(3), 3, 0, 0.0005, 0.0009999},
		"nan":          {math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), false, math.NaN(), int64(-1), -1, -1, math.NaN(), math.NaN()},
		"inf":          {math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(1), math.Inf(1), false, math.Inf(1), int64(math.MaxInt64), 1 << 20, 1 << 30, math.Inf(1), math.Inf(-1)},
		"out-of-range": {0.0, 15.0, 500.5, 501.0, 1e6 + 1, false, 1.5, int64(0), 0, -3, 0.0, 0.0},
		"slots-window": {500.0, 14.0, 5.0, 1.0, 0.0, false, 0.1, int64(10), 11, 3, 1000.0005, 1000.0004},
		"huge-floats":  {9.3e15, 1e300, -1e300, 5e-324, math.Copysign(0, -1), true, 1e-300, int64(math.MinInt64), math.MinInt64, math.MaxInt64, 1e18, 1e-18},
	},
}

// TestSeedCorpus checks that every seed is on disk, as plain go test
// replays testdata/fuzz. With -update it writes them.
func TestSeedCorpus(t *testing.T) {
	for target, byName := range seeds {
		for name, vals := range byName {
			path := filepath.Join("testdata", "fuzz", target, name)
			want := encode(vals...)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s is missing or stale; run go test ./internal/fuzzops -run TestSeedCorpus -update", path)
			}
		}
	}
}

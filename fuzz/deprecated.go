package fuzz

import (
	"time"

	"github.com/retrybudget/retrybudget/internal/fuzzops"
	"github.com/retrybudget/retrybudget/model"
)

// MaxOps is the most operations Ops and Instants decode from one input.
//
// Deprecated: the decoders serve budgettest.Fuzz, which is the way to fuzz
// a budget; they leave this package's API in the next release.
const MaxOps = fuzzops.MaxOps

// Ops decodes data into operations.
//
// Deprecated: use budgettest.Fuzz, which decodes its inputs itself.
func Ops(data []byte) []model.Op { return fuzzops.Ops(data) }

// Encode returns bytes that Ops decodes to ops.
//
// Deprecated: use budgettest.Fuzz, which seeds its corpus itself.
func Encode(ops []model.Op) []byte { return fuzzops.Encode(ops) }

// Instants decodes data into operations on a ratio window with absolute
// clock readings.
//
// Deprecated: use budgettest.Fuzz, which decodes its inputs itself.
func Instants(start time.Duration, data []byte) []model.Op { return fuzzops.Instants(start, data) }

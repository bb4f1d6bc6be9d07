package linearizability

import (
	"testing"

	"github.com/retrybudget/retrybudget/model"
)

// seqHistory is a history of a bucket of 40 tokens at 10 a retry: before
// retries, each returning before the next is called, then two concurrent
// retries, granted as given.
func seqHistory(before int, granted [2]bool) model.History {
	var h model.History
	stamp := int64(0)
	for i := range before {
		h = append(h, model.Operation{Client: 0, Op: model.OpRetry(model.Transient), Granted: i < 4, Call: stamp + 1, Return: stamp + 2})
		stamp += 2
	}
	h = append(h,
		model.Operation{Client: 1, Op: model.OpRetry(model.Transient), Granted: granted[0], Call: stamp + 1, Return: stamp + 4},
		model.Operation{Client: 2, Op: model.OpRetry(model.Transient), Granted: granted[1], Call: stamp + 2, Return: stamp + 3})
	return h
}

var seqBucket = model.TokenBucket{Capacity: 40_000, TransientCost: 10_000, ThrottledCost: 10_000}

// The sequential prefix is found, stepped through the model, and left
// out of the rest; a prefix the model rejects, or one too short, is not
// taken apart.
func TestSequentialPrefix(t *testing.T) {
	h := seqHistory(40, [2]bool{false, false})
	rest, state, ok := sequentialPrefix[model.TokenBucketState](seqBucket, h)
	if !ok || len(rest) != 2 {
		t.Fatalf("sequentialPrefix(40 sequential retries, then 2 concurrent) = %d left, %v; want 2 left, true", len(rest), ok)
	}
	if want := seqBucket.Init(); seqBucket.Equal(state, want) {
		t.Errorf("sequentialPrefix left the state at its start (%s): the prefix was not stepped", seqBucket.DescribeState(state))
	}
	if _, _, ok := sequentialPrefix[model.TokenBucketState](seqBucket, seqHistory(seqPrefixMin-1, [2]bool{})); ok {
		t.Errorf("sequentialPrefix took apart a prefix of %d, under seqPrefixMin", seqPrefixMin-1)
	}
	bad := seqHistory(40, [2]bool{})
	bad[10].Granted = true // the bucket was empty
	if _, _, ok := sequentialPrefix[model.TokenBucketState](seqBucket, bad); ok {
		t.Errorf("sequentialPrefix took apart a prefix the model rejects")
	}
}

// Check gives the same verdict with the shortcut as the whole search: a
// violation in the prefix, a violation after it, and a pass.
func TestCheckWithASequentialPrefix(t *testing.T) {
	inPrefix := seqHistory(40, [2]bool{false, false})
	inPrefix[10].Granted = true
	for _, tt := range []struct {
		name string
		h    model.History
		want Verdict
	}{
		{"Linearizable", seqHistory(40, [2]bool{false, false}), Linearizable},
		{"ViolationAfterThePrefix", seqHistory(40, [2]bool{true, false}), Violation},
		{"ViolationInThePrefix", inPrefix, Violation},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := Check[model.TokenBucketState](seqBucket, tt.h, 0)
			if r.Verdict != tt.want {
				t.Fatalf("Check = %v, want %v", r.Verdict, tt.want)
			}
			if whole := check[model.TokenBucketState](seqBucket, tt.h, 0); whole.Verdict != r.Verdict {
				t.Errorf("Check = %v, but the whole search says %v", r.Verdict, whole.Verdict)
			}
			if r.Verdict == Violation && len(r.Prefix) == 0 && len(r.Stuck) == 0 {
				t.Errorf("a violation with no explanation: the whole history must be searched again")
			}
		})
	}
}

package linearizability_test

import (
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

var oneRetry = model.TokenBucket{Capacity: 14_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}

func op(client int, o model.Op, granted bool, call, ret int64) model.Operation {
	return model.Operation{Client: client, Op: o, Granted: granted, Call: call, Return: ret}
}

func TestCheckVerdicts(t *testing.T) {
	retry := model.OpRetry(model.Transient)
	tests := []struct {
		name string
		h    model.History
		want linearizability.Verdict
	}{
		{"OverlappingRetriesOneGranted", model.History{
			op(1, retry, true, 1, 4), op(2, retry, false, 2, 3),
		}, linearizability.Linearizable},
		{"OverlappingRetriesBothGranted", model.History{
			op(1, retry, true, 1, 4), op(2, retry, true, 2, 3),
		}, linearizability.Violation},
		{"RefundOverlapsExplainsSecondGrant", model.History{
			op(1, retry, true, 1, 2), op(2, model.OpSuccess(model.Transient), false, 3, 6), op(1, retry, true, 4, 5),
		}, linearizability.Linearizable},
		{"RefundAfterCannotExplainEarlierGrant", model.History{
			op(1, retry, true, 1, 2), op(1, retry, true, 3, 4), op(2, model.OpSuccess(model.Transient), false, 5, 6),
		}, linearizability.Violation},
		{"DeniedWhileFull", model.History{
			op(1, retry, false, 1, 2),
		}, linearizability.Violation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := linearizability.Check(oneRetry, tt.h, 5*time.Second)
			if r.Verdict != tt.want {
				t.Errorf("Check = %v, want %v\n%s", r.Verdict, tt.want, r.Explain())
			}
		})
	}
}

func TestExplainNamesTheStuckOperation(t *testing.T) {
	retry := model.OpRetry(model.Transient)
	h := model.History{
		op(0, model.OpRequest, false, 1, 2),
		op(1, retry, true, 3, 6), op(2, retry, true, 4, 5),
	}
	r := linearizability.Check(oneRetry, h, 5*time.Second)
	if r.Verdict != linearizability.Violation {
		t.Fatalf("Check = %v, want violation", r.Verdict)
	}
	if len(r.Prefix) != 2 || r.State.Tokens != 0 {
		t.Errorf("longest order %v ending in %+v; want request and one retry, then 0 tokens", r.Prefix, r.State)
	}
	text := r.Explain()
	for _, want := range []string{
		"not linearizable", "the longest order the model accepts has 2 operations",
		"model is in state tokens=0", "retry(transient) -> granted", "but the model answers denied",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("Explain() lacks %q:\n%s", want, text)
		}
	}
	t.Logf("\n%s", text)
}

func TestTimeoutIsInconclusive(t *testing.T) {
	// A linearizable history that takes milliseconds to search, with a
	// timeout far too short: the verdict must be inconclusive, never
	// linearizable.
	var h model.History
	for i := range int64(50_000) {
		h = append(h, op(int(i%4)+1, model.OpSuccess(model.FirstAttempt), false, 2*i+1, 2*i+4))
	}
	r := linearizability.Check(oneRetry, h, time.Nanosecond)
	if r.Verdict != linearizability.Inconclusive {
		t.Fatalf("Check with a 1ns timeout = %v, want inconclusive", r.Verdict)
	}
	if !strings.Contains(r.Explain(), "this is not a pass") {
		t.Errorf("Explain() = %q", r.Explain())
	}
}

func TestPendingCalls(t *testing.T) {
	retry := model.OpRetry(model.Transient)
	pending := func(client int, o model.Op, call int64) model.Operation {
		return model.Operation{Client: client, Op: o, Call: call, Pending: true}
	}
	tests := []struct {
		name string
		h    model.History
		want linearizability.Verdict
	}{
		// A pending retry may have taken the only 14 tokens: the later
		// denial is explained by it.
		{"PendingRetryExplainsADenial", model.History{
			pending(1, retry, 1), op(2, retry, false, 3, 4),
		}, linearizability.Linearizable},
		// Or it may never have happened: a later grant is fine too.
		{"PendingRetryMayNotHaveHappened", model.History{
			pending(1, retry, 1), op(2, retry, true, 3, 4),
		}, linearizability.Linearizable},
		// A pending refund may land between two grants and pay for the
		// second; a pending request could not.
		{"PendingRefundExplainsASecondGrant", model.History{
			pending(1, model.OpSuccess(model.Transient), 1), op(2, retry, true, 3, 4), op(2, retry, true, 5, 6),
		}, linearizability.Linearizable},
		{"TwoGrantsWithoutRefund", model.History{
			pending(1, model.OpRequest, 1), op(2, retry, true, 3, 4), op(2, retry, true, 5, 6),
		}, linearizability.Violation},
		// A reset (a restart without persistence) refills the bucket.
		{"ResetExplainsASecondGrant", model.History{
			op(2, retry, true, 1, 2), op(3, model.OpReset, false, 3, 4), op(2, retry, true, 5, 6),
		}, linearizability.Linearizable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := linearizability.Check(oneRetry, tt.h, 5*time.Second)
			if r.Verdict != tt.want {
				t.Errorf("Check = %v, want %v\n%s", r.Verdict, tt.want, r.Explain())
			}
		})
	}
}

// A pending call with a Settled bound took effect before it or not at
// all: a history that needs the call's effect after the bound is a
// violation, and the same history without the bound is linearizable.
func TestPendingSettledBound(t *testing.T) {
	m := model.TokenBucket{Capacity: 1000, TransientCost: 1000, ThrottledCost: 1000}
	retry := model.OpRetry(model.Transient)
	h := model.History{
		{Client: 1, Op: retry, Call: 1, Pending: true, Settled: 3},            // unknown, settled by 3
		{Client: 2, Op: retry, Granted: true, Call: 4, Return: 5},             // drains the bucket
		{Client: 2, Op: model.OpSuccess(model.Transient), Call: 6, Return: 7}, // refunds it
		{Client: 2, Op: retry, Granted: false, Call: 8, Return: 9},            // denied: needs a drain after 7
	}
	if r := linearizability.Check(m, h, 10*time.Second); r.Verdict != linearizability.Violation {
		t.Errorf("with the pending call settled by 3: %v, want a violation", r.Verdict)
	}
	h[0].Settled = 0
	if r := linearizability.Check(m, h, 10*time.Second); r.Verdict != linearizability.Linearizable {
		t.Errorf("with the pending call unbounded: %v, want linearizable (it can drain the bucket after 7)", r.Verdict)
	}
}

package linearizability_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
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

func TestReadStampsFindTheOrderOfALock(t *testing.T) {
	// A history recorded under control from a Finagle-style ratio that
	// holds its mutex across calls into two counters of another package
	// (a correct budget): the whole search took 14 s and 1.7 GiB of heap on
	// it, and on others like it went past 2 GiB.
	// Its calls wait for the lock, so each overlaps the next four, and a
	// request placed on the wrong side of a clock step shows only at a
	// denial about a hundred retries later. The stamps around each call's
	// clock reading leave nothing to guess.
	f, err := linearizability.LoadFixture(filepath.Join("testdata", "histories", "monitor-finagle.json"))
	if err != nil {
		t.Fatal(err)
	}
	stamped := 0
	for _, o := range f.History {
		if o.ReadFrom > 0 {
			stamped++
		}
	}
	if stamped < len(f.History)/2 {
		t.Fatalf("%d of %d operations carry read stamps; the fixture lost them", stamped, len(f.History))
	}
	r := linearizability.Check(*f.Model.Ratio, f.History, time.Second)
	if r.Verdict != linearizability.Linearizable {
		t.Fatalf("Check = %v, want linearizable\n%s", r.Verdict, r.Explain())
	}
	t.Logf("linearizable in %v", r.Elapsed)
}

func TestRecordStampsReadsOnTheCallersGoroutine(t *testing.T) {
	// The reference ratio reads the clock in the caller's goroutine, on
	// every request and retry.
	tg := ratio(shortRatio)
	h, err := linearizability.Record(context.Background(), tg.scenario(3, 4, 50), tg.new)
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	for _, o := range h {
		if o.ReadFrom == 0 {
			if o.Op.Op == model.Request {
				t.Errorf("%v: a request read no clock", o)
			}
			continue
		}
		reads++
		if o.ReadFrom <= o.Call || o.ReadTo <= o.ReadFrom || o.ReadTo >= o.Return {
			t.Errorf("%v: readings stamped at [%d,%d], outside the call", o, o.ReadFrom, o.ReadTo)
		}
	}
	if reads == 0 {
		t.Fatal("no call has read stamps")
	}
	// A budget whose clock is read by another goroutine (an actor) gets
	// none: that reading is not the call's.
	actor := func(c budget.Clock) budget.Budget { return newActorClockReader(c) }
	h, err = linearizability.Record(context.Background(), tg.scenario(3, 4, 50), actor)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range h {
		if o.ReadFrom != 0 {
			t.Errorf("%v: stamped readings %d..%d made by another goroutine", o, o.ReadFrom, o.ReadTo)
		}
	}
}

// actorClockReader is a budget that grants everything and reads the clock
// on a goroutine of its own, for every request.
type actorClockReader struct {
	asks chan chan struct{}
}

func newActorClockReader(c budget.Clock) *actorClockReader {
	a := &actorClockReader{asks: make(chan chan struct{})}
	go func() {
		for done := range a.asks {
			c.Now()
			close(done)
		}
	}()
	return a
}

func (a *actorClockReader) Request() {
	done := make(chan struct{})
	a.asks <- done
	<-done
}
func (a *actorClockReader) Retry(budget.Kind) bool { return false }
func (a *actorClockReader) Success(budget.Kind)    {}
func (a *actorClockReader) Close() error           { close(a.asks); return nil }

func TestReadStampsNeverReject(t *testing.T) {
	retry := model.OpRetry(model.Transient)
	withReads := func(o model.Operation, from, to int64) model.Operation {
		o.ReadFrom, o.ReadTo = from, to
		return o
	}
	// Long histories, so that the stamps are used.
	pad := func(h model.History) model.History {
		var out model.History
		for i := range int64(80) {
			out = append(out, op(3, model.OpSuccess(model.FirstAttempt), false, 2*i+1, 2*i+2))
		}
		for _, o := range h {
			o.Call += 1000
			o.Return += 1000
			if o.ReadFrom > 0 {
				o.ReadFrom += 1000
				o.ReadTo += 1000
			}
			out = append(out, o)
		}
		return out
	}
	// g2's denial is right only if g1's grant came first, but the
	// stamps put g2's reading first: the order the stamps suggest
	// fails, the one Call and Return allow passes.
	h := pad(model.History{
		withReads(op(1, retry, true, 1, 6), 4, 5),
		withReads(op(2, retry, false, 2, 7), 2, 3),
	})
	if r := linearizability.Check(oneRetry, h, 5*time.Second); r.Verdict != linearizability.Linearizable {
		t.Errorf("misleading stamps: Check = %v, want linearizable\n%s", r.Verdict, r.Explain())
	}
	// Two grants of the one retry stay a violation, stamps or not.
	h = pad(model.History{
		withReads(op(1, retry, true, 1, 6), 2, 3),
		withReads(op(2, retry, true, 2, 7), 4, 5),
	})
	if r := linearizability.Check(oneRetry, h, 5*time.Second); r.Verdict != linearizability.Violation {
		t.Errorf("two grants: Check = %v, want violation\n%s", r.Verdict, r.Explain())
	}
}

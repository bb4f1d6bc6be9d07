package stress

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// Short names for hand-written logs.
var (
	eRequest = endsEvent{op: evRequest}
	eCallEnd = endsEvent{op: evCallEnd}
	eCancel  = endsEvent{op: evCancel}
	eReturn  = endsEvent{op: evReturned}
)

func eGrant(k budget.Kind) endsEvent   { return endsEvent{op: evRetry, kind: k, granted: true} }
func eDeny(k budget.Kind) endsEvent    { return endsEvent{op: evRetry, kind: k} }
func eSuccess(k budget.Kind) endsEvent { return endsEvent{op: evSuccess, kind: k} }
func eEnd(k budget.Kind) endsEvent     { return endsEvent{op: evAttemptEnd, kind: k} }
func eBegin(n int) endsEvent           { return endsEvent{op: evBegin, n: n} }
func eFinish(n int) endsEvent          { return endsEvent{op: evFinish, n: n, err: ErrTransient} }

const (
	first     = budget.FirstAttempt
	transient = budget.Transient
	throttled = budget.Throttled
)

// endsProblems accepts the structure budget.Retrier keeps and a hedge's,
// and names what is wrong with each way of breaking it.
func TestEveryStartEndsStructure(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		log  []endsEvent
		want string // a piece of the problems; "" for none
	}{
		{"Success", []endsEvent{eRequest, eBegin(1), eFinish(1), eSuccess(first), eEnd(first), eCallEnd, eReturn}, ""},
		{"SuccessOnRetry", []endsEvent{eRequest, eBegin(1), eFinish(1), eEnd(first), eGrant(transient), eBegin(2), eFinish(2), eSuccess(transient), eEnd(transient), eCallEnd, eReturn}, ""},
		{"Denied", []endsEvent{eRequest, eBegin(1), eFinish(1), eEnd(first), eDeny(transient), eCallEnd, eReturn}, ""},
		{"CancelDuringBackoff", []endsEvent{eRequest, eBegin(1), eFinish(1), eEnd(first), eGrant(throttled), eCancel, eEnd(throttled), eCallEnd, eReturn}, ""},
		// A hedge starts while the first attempt runs; the loser ends once
		// it has returned, after the winner.
		{"Hedge", []endsEvent{eRequest, eBegin(1), eGrant(transient), eBegin(2), eFinish(2), eSuccess(transient), eEnd(transient), eFinish(1), eEnd(first), eCallEnd, eReturn}, ""},
		{"TwoHedges", []endsEvent{eRequest, eBegin(1), eGrant(transient), eBegin(2), eGrant(transient), eBegin(3), eFinish(3), eSuccess(transient), eEnd(transient), eFinish(1), eFinish(2), eEnd(transient), eEnd(first), eCallEnd, eReturn}, ""},

		{"NeverRunRetryNotEnded", []endsEvent{eRequest, eBegin(1), eFinish(1), eEnd(first), eGrant(throttled), eCancel, eCallEnd, eReturn},
			"1 throttled retry started and never ended (2 started, 1 ran: a retry granted whose attempt never ran"},
		{"SuccessNotEnded", []endsEvent{eRequest, eBegin(1), eFinish(1), eSuccess(first), eCallEnd, eReturn}, "1 first attempt started and never ended"},
		{"WrongKind", []endsEvent{eRequest, eBegin(1), eFinish(1), eEnd(first), eGrant(throttled), eBegin(2), eFinish(2), eEnd(first), eCallEnd, eReturn},
			"event 8, AttemptEnd(first), with no first attempt open"},
		{"EndedTwice", []endsEvent{eRequest, eBegin(1), eFinish(1), eEnd(first), eEnd(first), eCallEnd, eReturn}, "an end told twice"},
		{"SuccessAfterEnd", []endsEvent{eRequest, eBegin(1), eFinish(1), eEnd(first), eSuccess(first), eCallEnd, eReturn}, "event 5, Success(first), with no first attempt open"},
		{"EndedLate", []endsEvent{eRequest, eBegin(1), eFinish(1), eGrant(transient), eEnd(first), eBegin(2), eFinish(2), eEnd(transient), eCallEnd, eReturn},
			"event 4, Retry(transient)=granted, started a retry before the end of 1 first attempt"},
		{"LoserEndedWhileRunning", []endsEvent{eRequest, eBegin(1), eGrant(transient), eBegin(2), eFinish(2), eSuccess(transient), eEnd(transient), eEnd(first), eFinish(1), eCallEnd, eReturn},
			"event 8, AttemptEnd(first), while its operation still ran"},
		{"CallEndTwice", []endsEvent{eRequest, eBegin(1), eFinish(1), eEnd(first), eCallEnd, eCallEnd, eReturn}, "a second CallEnd"},
		{"CallEndBeforeLastEnd", []endsEvent{eRequest, eBegin(1), eFinish(1), eCallEnd, eEnd(first), eReturn}, "event 5, AttemptEnd(first), came after CallEnd"},
		{"CallEndWhileRunning", []endsEvent{eRequest, eBegin(1), eGrant(transient), eBegin(2), eFinish(2), eSuccess(transient), eEnd(transient), eCallEnd, eReturn, eFinish(1)},
			"CallEnd, while 1 operation(s) still ran"},
		{"CallEndAfterReturn", []endsEvent{eRequest, eBegin(1), eFinish(1), eEnd(first), eReturn, eCallEnd}, "event 6, CallEnd, came after the call returned"},
		{"NoCallEnd", []endsEvent{eRequest, eBegin(1), eFinish(1), eEnd(first), eReturn}, "no CallEnd"},
		{"SecondRequest", []endsEvent{eRequest, eRequest, eBegin(1), eFinish(1), eEnd(first), eCallEnd, eReturn}, "a second Request"},
	}
	for _, tc := range cases {
		problems := strings.Join(endsProblems(tc.log), "; ")
		switch {
		case tc.want == "" && problems != "":
			t.Errorf("%s: %s\n\tlog: %s", tc.name, problems, joinEvents(tc.log))
		case tc.want != "" && !strings.Contains(problems, tc.want):
			t.Errorf("%s: problems %q, want them to say %q\n\tlog: %s", tc.name, problems, tc.want, joinEvents(tc.log))
		}
	}
}

// The reference loop passes EveryStartEnds; go test -run EveryStartEnds
// -count=20 repeats it.
func TestEveryStartEndsRetrier(t *testing.T) {
	t.Parallel()
	checkEveryStartEnds(t, RetrierLoop())
}

// retrierThrough returns budget.Retrier's adapter with the budget the
// check gives changed by wrap first.
func retrierThrough(name string, wrap func(budget.Budget) budget.Budget) Loop {
	return Loop{Name: name, Call: func(ctx context.Context, b budget.Budget, s Settings, op func(context.Context) error) error {
		return RetrierLoop().Call(ctx, wrap(b), s, op)
	}}
}

// plain hides that a budget is in flight.
type plain struct{ budget.Budget }

// callEndTwice tells the budget of the end of a call twice.
type callEndTwice struct{ budget.InFlightBudget }

func (c callEndTwice) CallEnd() { c.InFlightBudget.CallEnd(); c.InFlightBudget.CallEnd() }

// endsAtCallEnd keeps the ends of attempts until the end of the call.
type endsAtCallEnd struct {
	budget.InFlightBudget
	mu   sync.Mutex
	kept []budget.Kind
}

func (e *endsAtCallEnd) AttemptEnd(k budget.Kind) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.kept = append(e.kept, k)
}

func (e *endsAtCallEnd) CallEnd() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, k := range e.kept {
		e.InFlightBudget.AttemptEnd(k)
	}
	e.InFlightBudget.CallEnd()
}

// EveryStartEnds fails a loop that tells an in-flight budget nothing of
// ends, with the reason a budget leaks, and one that breaks the structure,
// naming the path and listing what the budget saw.
func TestEveryStartEndsCatches(t *testing.T) {
	t.Parallel()
	cases := []struct {
		loop Loop
		want []string
	}{
		{retrierThrough("HidesInFlight", func(b budget.Budget) budget.Budget { return plain{b} }),
			[]string{"HidesInFlight does not tell in-flight budgets when attempts and calls end", "leaks a permit on every call", "may Skip EveryStartEnds"}},
		{retrierThrough("CallEndTwice", func(b budget.Budget) budget.Budget { return callEndTwice{b.(budget.InFlightBudget)} }),
			[]string{"CallEndTwice, on the path Success (", "a second CallEnd", "the budget saw: Request, [attempt 1 runs], [attempt 1 returns nil], Success(first), AttemptEnd(first), CallEnd, CallEnd, [Call returns nil]"}},
		{retrierThrough("EndsAtCallEnd", func(b budget.Budget) budget.Budget { return &endsAtCallEnd{InFlightBudget: b.(budget.InFlightBudget)} }),
			[]string{"EndsAtCallEnd, on the path SuccessOnRetry (", "started a retry before the end of 1 first attempt, with 0 operation(s) running"}},
	}
	for _, tc := range cases {
		outcomes := isolate(t, tc.loop, []string{"EveryStartEnds"}, time.Minute, 0)
		if outcomes == nil {
			continue // the child
		}
		o := outcomes["EveryStartEnds"]
		if o.Result != "fail" {
			t.Errorf("EveryStartEnds on %s: %s, want fail:\n%s", tc.loop.Name, o.Result, o.Output)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(o.Output, w) {
				t.Errorf("EveryStartEnds on %s: the failure does not say %q:\n%s", tc.loop.Name, w, o.Output)
			}
		}
		if strings.Contains(o.Output, "premise not reached") {
			t.Errorf("EveryStartEnds on %s: a premise not reached, by a loop that reaches every one:\n%s", tc.loop.Name, o.Output)
		}
	}
}

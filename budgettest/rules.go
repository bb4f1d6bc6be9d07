package budgettest

import (
	"fmt"
	"path/filepath"
	"runtime"
)

// A rule is a promise a budget, its model or its subject must keep.
// Failures name the rule and the line of this package that found it
// broken, so that a user who jumps there sees the check itself.
type rule string

// The rules. Each Failure names one of these.
const (
	ruleSubject       rule = "the subject describes a budget the suite can check: a factory, a valid model, and sane timing"
	ruleFactory       rule = "the factory builds a budget without panicking"
	ruleFactoryNil    rule = "the factory returns a non-nil budget"
	ruleFactoryExit   rule = "the factory returns a budget: it does not call t.Fatal, t.FailNow or runtime.Goexit"
	ruleNoPanic       rule = "no budget method panics, on any operation a caller can make"
	ruleModel         rule = "the model is deterministic and total: the same state and operation always give the same state and answer, and Step never panics"
	ruleSequential    rule = "every answer equals the model's when the operations run one at a time"
	ruleLinearizable  rule = "every concurrent history has an order, consistent with real time, that the model accepts"
	ruleConclusive    rule = "the linearizability search ends before its timeout: an inconclusive check is not a pass"
	ruleInvariant     rule = "under contention the budget never grants more than its family's conservation invariant allows"
	ruleBursts        rule = "under contention the budget grants exactly what the model grants and ends in its state (bursts of one call, refunds at an edge, cycles of calls)"
	ruleInFlight      rule = "an in-flight budget never has more retries in flight than its rule admits, grants at its limit what any order grants, and releases an ended retry once"
	ruleNoDeadlock    rule = "every call returns: the budget neither deadlocks nor livelocks"
	ruleNoLeak        rule = "no goroutine the budget started outlives it (a budget that owns goroutines stops them in Close() error)"
	ruleClose         rule = "a call racing Close, or made after it, returns without panicking (package budget, \"Closing a budget\")"
	ruleReplay        rule = "fixed edge-case sequences (drains, 140,000 calls at one instant, ramps, slot edges, clock jumps near overflow, idle gaps where narrow counters wrap, idle gaps with calls in flight, refills) give the model's answers"
	ruleEdges         rule = "from any starting instant, negative or near the ends of int64, the budget answers as the model does"
	ruleAmplification rule = "under a 100% outage the budget grants no more retries than its model: it bounds the load"
	rulePanic         rule = "nothing the suite calls panics: the model's methods included"
	ruleControl       rule = "the concurrent checks explore controlled schedules (an instrumented child process) and finish there"
	ruleNoRace        rule = "the budget shares no memory between goroutines without synchronization: the race detector reports no data race while 64 goroutines call it at once"
)

// fail returns a Failure of rule r, found at the caller's line.
func fail(r rule, format string, args ...any) *Failure {
	_, file, line, _ := runtime.Caller(1)
	return &Failure{Rule: string(r), Where: fmt.Sprintf("budgettest/%s:%d", filepath.Base(file), line), Detail: fmt.Sprintf(format, args...)}
}

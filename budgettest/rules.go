package budgettest

import (
	"fmt"
	"path/filepath"
	"runtime"
)

// A rule is a promise a budget or a loop must keep, with the place it is
// written: failures cite it, as slogtest cites its cases.
type rule struct {
	text  string
	where string // file:line of the rule below
}

func newRule(text string) rule {
	_, file, line, _ := runtime.Caller(1)
	return rule{text: text, where: fmt.Sprintf("%s:%d", filepath.Join("budgettest", filepath.Base(file)), line)}
}

func (r rule) String() string { return r.text + " (" + r.where + ")" }

// The rules. Each failure message names one of these and its line here.
var (
	ruleFactory       = newRule("the factory builds a non-nil budget, without panicking")
	ruleModel         = newRule("the model is deterministic: the same state and operation always give the same state and answer")
	ruleSequential    = newRule("every answer equals the model's when the operations run one at a time")
	ruleLinearizable  = newRule("every concurrent history has an order, consistent with real time, that the model accepts")
	ruleConclusive    = newRule("the linearizability search ends before its timeout: an inconclusive check is not a pass")
	ruleInvariant     = newRule("under contention the budget never grants more than its family's conservation invariant allows")
	ruleNoDeadlock    = newRule("every call returns: the budget neither deadlocks nor livelocks")
	ruleNoLeak        = newRule("no goroutine the budget started outlives it")
	ruleReplay        = newRule("fixed edge-case sequences (drains, clock jumps, refill fractions) give the model's answers")
	ruleAmplification = newRule("under a 100% outage the budget grants no more retries than its model: it bounds the load")
)

package linearizability

import "github.com/retrybudget/retrybudget/model"

// An Operation is one completed call in a history; see [model.Operation].
type Operation = model.Operation

// A History is the operations of one run, in the order they were called;
// see [model.History].
type History = model.History

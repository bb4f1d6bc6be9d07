package linearizability

import "github.com/retrybudget/retrybudget/model"

// An Operation is one completed call in a history.
//
// Deprecated: use model.Operation, which this names; Operation goes in the
// next release.
type Operation = model.Operation

// A History is the operations of one run, in the order they were called.
//
// Deprecated: use model.History, which this names; History goes in the
// next release.
type History = model.History

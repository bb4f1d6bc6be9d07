// Package redisbudget keeps a retry budget in Redis, so that a whole fleet
// of processes shares one allowance.
//
// A budget in each process does not bound a fleet: N processes have N
// budgets, and a fleet scales out exactly when its dependency is failing.
// TokenBucket and Ratio keep the budget package's semantics, but their
// state lives in one Redis hash per budget name, and every call is one Lua
// script that runs atomically in the server (cached by its SHA, EVALSHA).
// Time comes from the server's TIME, one clock for the whole fleet, or from
// an injected budget.Clock in tests. Keys expire after IdleTTL without
// calls.
//
// When Redis is unreachable or slow, a call gives up after CallTimeout (or
// when the caller's context ends, for the Context methods), and a retry is
// denied: the budget fails closed, and the error goes to OnError and to the
// Errors counter. Failing open, or falling back to a full budget per
// process, would multiply the fleet's retries by its size exactly when
// things go wrong. FleetSize opts into a fallback that cannot: a local
// budget with 1/FleetSize of the capacity (and of the floor and the
// reserve).
//
// A key that holds what the scripts did not write is never read as a new
// budget: a call to it fails with ErrCorrupt. A key made by a process with
// other settings fails with ErrConfigMismatch, naming both. Both budgets are
// budget.ContextBudgets, so budget.Retrier tells a failed Redis
// (budget.ErrBudgetUnavailable) from a denial (budget.ErrDenied).
//
// A restart of Redis without persistence loses the budget: it starts again
// full (a token bucket) or empty (a ratio). See docs/redis.md for what that
// means and how to avoid it.
package redisbudget

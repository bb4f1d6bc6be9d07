// Package lostupdates is a team's module, outside this one, with nine
// retry budgets that each lose an update or read a stale value under
// concurrency: an Add then a clamping Store, a refund clamped from an
// earlier Load, CAS loops that decide from a stale read, a slot rotation
// done before the lock is taken, a check-then-act across two critical
// sections, a pair of atomics read apart, a deny flag stored after the
// unlock, and a lazily built window published without a CAS. They were
// written apart from the suite, from the budget and model packages' docs,
// each with its model and a sequential test that shows it is exact one
// call at a time. TestBroken is the gate: plain go test must catch every
// one and tell where the calls met in this module's lines, with a replay.
// Never use these budgets.
package lostupdates

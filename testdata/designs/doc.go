// Package designs holds retry budgets of unusual concurrent designs, written
// from the public contract of github.com/retrybudget/retrybudget alone (the
// budget and model packages' documentation and the reference budgets) by a
// team that has not read the conformance suite's implementation. Every one
// of them is meant to be correct: each answers exactly as the model it
// claims, one call at a time and under any interleaving, so any failure the
// suite (package budgettest) reports against one of them is either a bug in
// the budget or a false alarm of the suite.
//
// One file per budget, each with a doc comment giving its design and the
// argument for its linearizability:
//
//   - CondBucket (token bucket with refill): the state is owned through a
//     busy flag guarded by a sync.Cond, so its critical section runs with no
//     mutex held.
//   - ActorBucket (token bucket with refill, no refund): every call is a
//     message to a worker goroutine that owns the state; Close stops the
//     worker and hands the state to a mutex for calls made afterwards.
//   - TicketThrottle (gRPC throttle): a FIFO ticket lock built from two
//     atomic counters guards the token count.
//   - SyncMapThrottle (gRPC throttle): the token count is one sync.Map
//     entry changed only by sync.Map.CompareAndSwap; per-kind statistics
//     are further entries.
//   - HintRatio (sliding-window ratio): a mutex-guarded ring of slots plus
//     an atomically published hint that lets a retry be denied without the
//     mutex, validated by reloading the hint around the clock read.
//   - PersistentRatio (sliding-window ratio with a reserve): read-copy-
//     update on an atomic.Pointer to an immutable persistent list of slots
//     that shares its tail between versions.
//   - StripedInFlight (failsafe-go's in-flight rule): the calls in flight
//     are counted in striped, separately locked counters; a retry takes
//     every stripe's lock in order.
//   - InvertedRWInFlight (Envoy's in-flight rule): the counters are atomics
//     changed under a sync.RWMutex's read lock, and a retry decides under
//     its write lock, where the counts cannot move.
//
// common.go holds the configurations (in the model package's milli-units)
// and the sequential arithmetic the budgets share.
package designs

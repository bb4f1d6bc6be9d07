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
//   - ChecksumRatio (sliding-window ratio with a floor and a reserve): a
//     150-slot ring under one mutex, every call recomputing a checksum of
//     the whole ring (and panicking on a mismatch) and recounting every
//     slot: bounded, slow-ish work under the lock.
//   - SemaphoreThrottle (gRPC throttle): the token count is guarded by a
//     golang.org/x/sync/semaphore.Weighted of size one, another module's
//     primitive used as a mutex.
//   - LockboxInFlight (Envoy's in-flight rule): the counts live in a
//     lockbox.Pair of the nested module example.com/lockbox (./lockbox),
//     whose methods hold that module's own mutex.
//   - WallClockBucket (token bucket with refill): reads time.Now itself,
//     as the monotonic time since its construction; a wall-clock subject.
//   - NetworkedThrottle (gRPC throttle): the count lives in a TCP server on
//     a free loopback port, each call one request and response over a
//     pooled connection; Close stops the server and hands the count to the
//     calls made afterwards.
//   - PipeRatio (sliding-window ratio with a reserve, no floor): the ring
//     belongs to a goroutine at the far end of a net.Pipe, reached one
//     exchange at a time under a mutex; Close stops it.
//   - RWBucket (token bucket without refill): a sync.RWMutex whose read
//     lock serves the fast denial of a short balance, and whose write lock
//     rechecks before it withdraws.
//   - PackedInFlight (failsafe-go's in-flight rule): both counts packed in
//     one atomic.Uint64, changed only by compare-and-swap loops.
//   - LazyRatio (sliding-window ratio with a floor): the ring is built on
//     first use by sync.Once, on the clock reading of the construction,
//     and guarded by a mutex after.
//   - HandoffBucket (token bucket with refill, no refund): every call
//     spawns a goroutine that does the work under a mutex and hands the
//     answer back on a channel the caller waits on.
//   - EpochRatio (sliding-window ratio with a floor and a reserve): the
//     window rotates on read under a sync.RWMutex's write lock; a request
//     in the current slot, checked against an atomic head slot, counts
//     itself with an atomic add under the read lock.
//
// common.go holds the configurations (in the model package's milli-units)
// and the sequential arithmetic the budgets share; ring.go the sequential
// ring of slots some of the ratio budgets share.
package designs

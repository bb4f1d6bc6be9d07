// Package fromdocs holds correct retry budgets written from the public
// contract of github.com/retrybudget/retrybudget alone (the README, the
// budget and model packages' documentation, the reference budgets) by a
// writer who had not read the conformance suite's implementation, each
// following one model of the model package exactly, and one written by the
// project after a false alarm of the suite:
//
//   - FinagleBudget (ratio with a reserve): a mutex held across two
//     window.Counters of another package, each with a mutex of its own.
//   - CowBucket (token bucket with refill, no refund): an immutable state
//     behind an atomic.Pointer, swapped by CompareAndSwap.
//   - SeqRatio (ratio with a floor): a seqlock; writers hold a mutex.
//   - ActorBucket (token bucket with refill): one goroutine owns the
//     state; Close stops it.
//   - GRPCThrottle (gRPC throttle, a FailureCounter): a sync.RWMutex.
//   - AtomicInFlight (failsafe-go's in-flight rule): both counts in one
//     atomic.Uint64, changed by CAS loops.
//   - StripedInFlight (Envoy's in-flight rule): four stripes picked round
//     robin; a retry locks them all.
//   - LazyBucket (token bucket with refill): a mutex, the last reading in
//     nanoseconds, lazy refill.
//   - GenRing (ratio with a floor and a reserve): a fixed ring, each slot
//     tagged with its generation.
//   - ChanThrottle (gRPC throttle): the count lives in a channel of
//     capacity one.
//   - MonitorRatio (ratio with a reserve, Finagle's defaults): a mutex held
//     across calls into two counter.Windows, each with its own mutex. The
//     suite called it a failure before the linearizability check learned
//     to search a history on the calls' clock readings first: its
//     controlled stage went past 2 GiB of heap on histories that are
//     linearizable (linearizability/testdata/histories/monitor-finagle.json).
//
// SplitSeenRatio is MonitorRatio's broken twin, the bug its first draft
// had: each counter keeps its own latest clock reading, so after the clock
// steps back the retries' counter never slides past retries the requests'
// counter has let go. The suite must catch it.
package fromdocs

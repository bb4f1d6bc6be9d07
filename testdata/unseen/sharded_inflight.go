package unseen

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// shardCount is how many shards ShardedInFlight spreads its calls over.
const shardCount = 8

// ShardedInFlight is an in-flight retry budget with Envoy's rule
// (model.EnvoyDefaults()) tuned for a proxy where every request starts and
// ends a call but few retry: the calls in flight are a sharded counter (a
// call's start and end each add to the next shard round-robin, each shard
// on its own cache line), and the retries in flight, rare, are a plain
// count under a mutex. Retry sums the shards, applies the rule, and counts
// the retry, all under the mutex. CallEnd ignores an end when the sum says
// no call is in flight.
//
// The bug: a sharded counter whose sum is read non-atomically and used for
// a decision. The shards are read one after the other, so a call that ends
// on a shard already read and a call that starts on a shard not yet read
// are both in the sum: it counts one call more than were ever in flight at
// once. With 19 calls and 3 retries in flight (19 calls allow
// max(3, ⌊3.8⌋) = 3, so no more retries):
//
//  1. goroutine A, in Retry(Transient), has read shard 0 (hook
//     "sharded.summing", after the first shard);
//  2. goroutine C ends a call, on shard 0 (18 calls);
//  3. goroutine D starts a call, on shard 1 (19 calls);
//  4. A reads the other shards: its sum is 20, which allows 4; it counts
//     the retry (4) and returns true.
//
// Wrong outcome: over-grant. Four retries in flight with never more than
// 19 calls, where the rule allows three; no order of the calls admits A.
type ShardedInFlight struct {
	m      model.InFlight
	next   atomic.Uint32 // round-robin shard index
	shards [shardCount]struct {
		n atomic.Int64
		_ [56]byte
	}

	mu      sync.Mutex
	retries int64
}

// NewShardedInFlight returns a budget following m (with the Envoy rule)
// with nothing in flight.
func NewShardedInFlight(m model.InFlight) *ShardedInFlight { return &ShardedInFlight{m: m} }

// shard returns the next shard, round-robin.
func (b *ShardedInFlight) shard() *atomic.Int64 {
	return &b.shards[b.next.Add(1)%shardCount].n
}

// calls sums the shards.
func (b *ShardedInFlight) calls() int64 {
	var sum int64
	for i := range b.shards {
		sum += b.shards[i].n.Load()
		if i == 0 {
			hook("sharded.summing")
		}
	}
	return sum
}

// Request counts a call in flight.
func (b *ShardedInFlight) Request() {
	if b.calls() < maxCount {
		b.shard().Add(1)
	}
}

// Retry grants a retry while the rule admits one more in flight.
func (b *ShardedInFlight) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retries >= envoyLimit(b.m, b.calls()) {
		return false
	}
	b.retries++
	return true
}

// Success does nothing.
func (b *ShardedInFlight) Success(budget.Kind) {}

// AttemptEnd ends a retry in flight.
func (b *ShardedInFlight) AttemptEnd(k budget.Kind) {
	if !k.IsRetry() {
		return
	}
	b.mu.Lock()
	if b.retries > 0 {
		b.retries--
	}
	b.mu.Unlock()
}

// CallEnd ends a call in flight.
func (b *ShardedInFlight) CallEnd() {
	if b.calls() > 0 {
		b.shard().Add(-1)
	}
}

// InFlight returns the calls and the retries in flight.
func (b *ShardedInFlight) InFlight() (calls, retries int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(b.calls()), int(b.retries)
}

// Available returns how many more retries the rule would grant now.
func (b *ShardedInFlight) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(max(envoyLimit(b.m, b.calls())-b.retries, 0))
}

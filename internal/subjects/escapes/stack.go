package escapes

import (
	"runtime"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// TaggedStackModel is the rule TaggedStack follows: a pool of 4 tokens. A
// retry of either kind takes one token if there is one; a successful retry
// gives its token back (up to 4); a successful first attempt gives nothing;
// time plays no part.
var TaggedStackModel = model.TokenBucket{Capacity: 4_000, TransientCost: 1_000, ThrottledCost: 1_000}

// ABAStackModel is the rule ABAStack claims to follow: the same pool.
var ABAStackModel = TaggedStackModel

// poolSize checks that m is a pool (a TokenBucket whose every retry costs
// one whole token, refunded on success, with no bonus and no refill) and
// returns its size in tokens.
func poolSize(m model.TokenBucket) uint32 {
	if err := m.Validate(); err != nil ||
		m.TransientCost != 1_000 || m.ThrottledCost != 1_000 || m.SuccessBonus != 0 ||
		m.RefillPerSecond != 0 || m.NoRefund || m.Capacity%1_000 != 0 || m.Capacity/1_000 > maxNodes {
		panic("escapes: a stack pool needs a TokenBucket of whole tokens (at most 65535), costs of 1 token, refund, no bonus, no refill")
	}
	return uint32(m.Capacity / 1_000)
}

// The nodes of both stacks live in an arena and are named by index (0 is
// nil), so that a stack's head fits in one atomic word with what goes with
// it. A node's link is atomic: a stale pop may read it while a push writes
// it.
const (
	arenaChunk = 256
	maxNodes   = 1<<16 - 1
)

type arena struct {
	chunks [(maxNodes + arenaChunk) / arenaChunk]atomic.Pointer[[arenaChunk]atomic.Uint32]
	n      atomic.Uint32 // nodes allocated
}

func (a *arena) next(i uint32) *atomic.Uint32 {
	j := i - 1
	return &a.chunks[j/arenaChunk].Load()[j%arenaChunk]
}

// alloc returns a new node, or false when the index space is used up.
func (a *arena) alloc() (uint32, bool) {
	for {
		n := a.n.Load()
		if n >= maxNodes {
			return 0, false
		}
		if a.n.CompareAndSwap(n, n+1) {
			if c := &a.chunks[n/arenaChunk]; c.Load() == nil {
				c.CompareAndSwap(nil, new([arenaChunk]atomic.Uint32))
			}
			return n + 1, true
		}
	}
}

// initPool allocates nodes 1..n linked 1→2→…→n.
func (a *arena) initPool(n uint32) {
	for i := uint32(1); i <= n; i++ {
		a.alloc()
	}
	for i := uint32(1); i < n; i++ {
		a.next(i).Store(i + 1)
	}
}

// ---------------------------------------------------------------------------
// ABAStack: the mutant.

// ABAStack is a lock-free pool of retry tokens: a Treiber stack of token
// nodes whose head word holds the top node's index and the number of
// tokens. Retry pops a token and puts its node on a free list (a second
// Treiber stack); a successful retry takes a node from the free list (or
// a new one, when every spare node is in some call's hands) and pushes it
// back as a token, unless the pool is full. Nodes are reused, so a busy
// budget allocates nothing.
//
// BUG (deliberate): the compare-and-swap of a pop compares the top index
// (and the count) only. A pop that read top A and A's link B, and was
// preempted while A was popped, reused and pushed back with another link
// and the same count, succeeds with its stale link: the stack's top then
// becomes a node that another call holds and is about to push, a token
// node drops out of the stack, and the node pushed twice links to itself.
// The head holds the count only to tell a full pool; empty is told by the
// top being nil, as in every Treiber stack.
//
// One interleaving that does it, from a full pool A→B→C→D (4 tokens):
//
//	G1 Retry:   reads head (A, 4) and A.next = B; preempted
//	G2 Retry:   pops A (CAS succeeds); preempted before putting A on the free list
//	G3 Retry:   pops B, puts B on the free list (B.next = nil)
//	G4 Success: takes B from the free list; preempted before pushing it
//	G3 Success: free list empty: a new node X; pushes it: X→C→D (3)
//	G2:         puts A on the free list; returns true
//	G3 Success: takes A, pushes it: A→X→C→D (4), the head G1 read
//	G1:         CAS((A, 4) → (B, 3)) succeeds, granted: the top is B, which G4 holds; X, C, D are lost
//	G4:         pushes B: B.next = B, head (B, 4)
//
// The next two retries are both granted token B (the same token twice),
// and then the stack is empty while its count says 2: from then on the
// pool grants 2 retries where the model grants up to 4, for good
// (TestStack plays this schedule step by step).
//
// In ordinary use, and under any schedule that does not reuse the node a
// preempted pop has read, it answers as its model says.
type ABAStack struct {
	n      uint32
	nodes  arena
	tokens atomic.Uint64 // top | count<<32
	free   atomic.Uint64 // top
}

var _ budget.Budget = (*ABAStack)(nil)

// NewABAStack returns a full pool following m (see ABAStackModel).
func NewABAStack(m model.TokenBucket) *ABAStack {
	b := &ABAStack{n: poolSize(m)}
	b.nodes.initPool(b.n)
	if b.n > 0 {
		b.tokens.Store(uint64(b.n)<<32 | 1)
	}
	return b
}

func (b *ABAStack) pushFree(node uint32) {
	for {
		h := b.free.Load()
		b.nodes.next(node).Store(uint32(h))
		if b.free.CompareAndSwap(h, uint64(node)) {
			return
		}
	}
}

func (b *ABAStack) spare() uint32 {
	for {
		h := b.free.Load()
		if top := uint32(h); top != 0 {
			if b.free.CompareAndSwap(h, uint64(b.nodes.next(top).Load())) {
				return top
			}
			continue
		}
		if node, ok := b.nodes.alloc(); ok {
			return node
		}
		runtime.Gosched() // 65535 nodes in calls' hands: wait for one
	}
}

// readTop reads the head of the token stack and the top node's link.
func (b *ABAStack) readTop() (h uint64, top, next uint32) {
	h = b.tokens.Load()
	if top = uint32(h); top != 0 {
		next = b.nodes.next(top).Load()
	}
	return h, top, next
}

// casPop pops the top read with head h, whose link was next.
func (b *ABAStack) casPop(h uint64, next uint32) bool {
	return b.tokens.CompareAndSwap(h, (h>>32-1)<<32|uint64(next))
}

// pushToken pushes node as a token, or puts it back on the free list if
// the pool is full.
func (b *ABAStack) pushToken(node uint32) {
	for {
		h := b.tokens.Load()
		count := uint32(h >> 32)
		if count >= b.n {
			b.pushFree(node)
			return
		}
		b.nodes.next(node).Store(uint32(h))
		if b.tokens.CompareAndSwap(h, uint64(count+1)<<32|uint64(node)) {
			return
		}
	}
}

// Request does nothing: a first attempt is free.
func (b *ABAStack) Request() {}

// Retry pops a token for a retry of a retry kind, if there is one.
func (b *ABAStack) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	for {
		h, top, next := b.readTop()
		if top == 0 {
			return false
		}
		if b.casPop(h, next) {
			b.pushFree(top)
			return true
		}
	}
}

// Success gives back the token of a successful retry, unless the pool is
// full; a successful first attempt gives nothing.
func (b *ABAStack) Success(kind budget.Kind) {
	if !kind.IsRetry() || uint32(b.tokens.Load()>>32) >= b.n {
		return
	}
	b.pushToken(b.spare())
}

// ---------------------------------------------------------------------------
// TaggedStack: the twin.

// TaggedStack is ABAStack with each head word tagged by a 32-bit version
// that every successful compare-and-swap increments: top index (16 bits),
// count (16 bits), version (32 bits), in one atomic.Uint64. A pop whose
// read is stale fails its compare-and-swap however the nodes were reused
// (unless exactly 2^32 swaps happened while it was preempted), and tries
// again. Its answers are those of TaggedStackModel (or the pool it is
// built with): a Retry takes effect at its successful swap (or is denied at
// a read of an empty stack), a Success at its push (or is a no-op at a read
// of a full count).
type TaggedStack struct {
	n      uint32
	nodes  arena
	tokens atomic.Uint64 // top | count<<16 | version<<32
	free   atomic.Uint64 // top | version<<32
}

var _ budget.Budget = (*TaggedStack)(nil)

const idxMask = 1<<16 - 1

func packHead(top, count, version uint32) uint64 {
	return uint64(version)<<32 | uint64(count)<<16 | uint64(top)
}

func unpackHead(h uint64) (top, count, version uint32) {
	return uint32(h & idxMask), uint32(h>>16) & idxMask, uint32(h >> 32)
}

// NewTaggedStack returns a full pool following m (see TaggedStackModel).
func NewTaggedStack(m model.TokenBucket) *TaggedStack {
	b := &TaggedStack{n: poolSize(m)}
	b.nodes.initPool(b.n)
	if b.n > 0 {
		b.tokens.Store(packHead(1, b.n, 0))
	}
	return b
}

func (b *TaggedStack) pushFree(node uint32) {
	for {
		h := b.free.Load()
		top, _, v := unpackHead(h)
		b.nodes.next(node).Store(top)
		if b.free.CompareAndSwap(h, packHead(node, 0, v+1)) {
			return
		}
	}
}

func (b *TaggedStack) spare() uint32 {
	for {
		h := b.free.Load()
		if top, _, v := unpackHead(h); top != 0 {
			if b.free.CompareAndSwap(h, packHead(b.nodes.next(top).Load(), 0, v+1)) {
				return top
			}
			continue
		}
		if node, ok := b.nodes.alloc(); ok {
			return node
		}
		runtime.Gosched() // 65535 nodes in calls' hands: wait for one
	}
}

// readTop reads the head of the token stack and the top node's link.
func (b *TaggedStack) readTop() (h uint64, top, next uint32) {
	h = b.tokens.Load()
	if top, _, _ = unpackHead(h); top != 0 {
		next = b.nodes.next(top).Load()
	}
	return h, top, next
}

// casPop pops the top read with head h, whose link was next.
func (b *TaggedStack) casPop(h uint64, next uint32) bool {
	_, count, v := unpackHead(h)
	return b.tokens.CompareAndSwap(h, packHead(next, count-1, v+1))
}

// pushToken pushes node as a token, or puts it back on the free list if
// the pool is full.
func (b *TaggedStack) pushToken(node uint32) {
	for {
		h := b.tokens.Load()
		top, count, v := unpackHead(h)
		if count >= b.n {
			b.pushFree(node)
			return
		}
		b.nodes.next(node).Store(top)
		if b.tokens.CompareAndSwap(h, packHead(node, count+1, v+1)) {
			return
		}
	}
}

// Request does nothing: a first attempt is free.
func (b *TaggedStack) Request() {}

// Retry pops a token for a retry of a retry kind, if there is one.
func (b *TaggedStack) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	for {
		h, top, next := b.readTop()
		if top == 0 {
			return false
		}
		if b.casPop(h, next) {
			b.pushFree(top)
			return true
		}
	}
}

// Success gives back the token of a successful retry, unless the pool is
// full; a successful first attempt gives nothing.
func (b *TaggedStack) Success(kind budget.Kind) {
	if !kind.IsRetry() {
		return
	}
	if _, count, _ := unpackHead(b.tokens.Load()); count >= b.n {
		return
	}
	b.pushToken(b.spare())
}

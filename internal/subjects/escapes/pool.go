package escapes

import (
	"runtime"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// The token pools keep their retry tokens as nodes of a lock-free Treiber
// stack: a granted retry pops a node, the success of a retry pushes one
// back. Nodes are named by their index in a fixed arena, so the hot path
// allocates nothing and a head fits in one atomic word. A popped node goes
// to a second stack of spare nodes, and the success that returns a token
// takes its node from there. Each stack keeps its own links (an array
// indexed by node), so moving a node onto one stack never rewrites its
// link on the other.
//
// The token stack also records each node's depth (the number of tokens
// from it to the bottom), so the head alone says how many tokens are left
// and a push can refuse to go past the capacity.

// poolTokens is the capacity of both pools, in tokens.
const poolTokens = 4

// poolSpare is how many nodes the arena holds besides the tokens: the
// nodes that pops and pushes in progress hold at once. A success that
// finds none spare yields until a retry in progress recycles its node.
const poolSpare = 1024

// poolNodes is the size of the arena; index 0 is nilNode and unused.
const poolNodes = 1 + poolTokens + poolSpare

// nilNode is the index of no node: an empty stack.
const nilNode = 0

// ABAPoolModel is the rule of ABAPool: four tokens, one per retry of
// either kind, refunded when the retry succeeds; a successful first
// attempt earns nothing.
var ABAPoolModel = model.TokenBucket{Capacity: poolTokens * 1000, TransientCost: 1000, ThrottledCost: 1000, SuccessBonus: 0}

// ABAPool is a lock-free token pool on a Treiber stack of arena nodes
// whose head is the bare index of the top node.
type ABAPool struct {
	tokens indexStack // the tokens left; nodes 1..poolTokens at first
	spare  indexStack // recycled nodes; the others at first
	depth  []atomic.Int32
}

var _ budget.Budget = (*ABAPool)(nil)

// NewABAPool returns a full ABAPool. It reads no clock.
func NewABAPool(budget.Clock) budget.Budget {
	p := &ABAPool{depth: make([]atomic.Int32, poolNodes)}
	p.tokens.next = make([]atomic.Uint32, poolNodes)
	p.spare.next = make([]atomic.Uint32, poolNodes)
	for i := uint32(1); i <= poolTokens; i++ {
		p.tokens.next[i].Store(i - 1)
		p.depth[i].Store(int32(i))
	}
	for i := uint32(poolTokens + 2); i < poolNodes; i++ {
		p.spare.next[i].Store(i - 1)
	}
	p.tokens.head.Store(poolTokens)
	p.spare.head.Store(poolNodes - 1)
	return p
}

// indexStack is a Treiber stack of arena nodes whose head is the index of
// its top node.
type indexStack struct {
	head atomic.Uint32
	next []atomic.Uint32 // by node: the node below it on this stack
}

// pop takes the top node off s and returns it, or nilNode when s is empty.
func (s *indexStack) pop() uint32 {
	for {
		top := s.head.Load()
		if top == nilNode {
			return nilNode
		}
		next := s.next[top].Load()
		// BUG: the compare-and-swap compares the top node's index only.
		// Between the load of top above and this CAS, top can be popped,
		// recycled and pushed back (a node is reused as soon as it is
		// recycled) over a different node, and the CAS still succeeds:
		// it installs next, which is no longer the node below top (ABA).
		// The token stack then loses a token or counts one twice (a stale
		// depth), and the pool answers unlike its model. One other
		// goroutine making calls cannot do it: nodes go back on the spare
		// stack in the order they left the token stack, so a node comes
		// back over the node it left. It takes three goroutines and two
		// preemptions: a Retry stopped between its loads and this CAS; a
		// second goroutine that pops top, recycles it, takes it back in a
		// Success and is stopped just before its push; a third whose
		// Success pushes another node meanwhile, so top goes back over it.
		if s.head.CompareAndSwap(top, next) {
			return top
		}
	}
}

// push puts node i on top of s.
func (s *indexStack) push(i uint32) {
	for {
		top := s.head.Load()
		s.next[i].Store(top)
		if s.head.CompareAndSwap(top, i) {
			return
		}
	}
}

// pushBelow puts node i on top of s unless s already holds limit nodes,
// and reports whether it did, keeping the depths.
func (s *indexStack) pushBelow(depth []atomic.Int32, i uint32, limit int32) bool {
	for {
		top := s.head.Load()
		d := depthOf(depth, top)
		if d >= limit {
			// A node being pushed has its depth written before its CAS,
			// so d may be one that never held; answer full only if top is
			// still the top (by index, as everywhere here).
			if s.head.Load() == top {
				return false
			}
			continue
		}
		s.next[i].Store(top)
		depth[i].Store(d + 1)
		if s.head.CompareAndSwap(top, i) { // the same index-only comparison
			return true
		}
	}
}

func depthOf(depth []atomic.Int32, i uint32) int32 {
	if i == nilNode {
		return 0
	}
	return depth[i].Load()
}

// Request does nothing: a first attempt is free.
func (p *ABAPool) Request() {}

// Retry takes a token for a retry of a retry kind, if one is left.
func (p *ABAPool) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	n := p.tokens.pop()
	if n == nilNode {
		return false
	}
	p.spare.push(n)
	return true
}

// Success gives the token of a successful retry back, up to the capacity.
func (p *ABAPool) Success(kind budget.Kind) {
	if !kind.IsRetry() {
		return
	}
	n := p.spare.pop()
	for n == nilNode { // every spare node is held by a call in progress
		runtime.Gosched()
		n = p.spare.pop()
	}
	if !p.tokens.pushBelow(p.depth, n, poolTokens) {
		p.spare.push(n)
	}
}

// TaggedPoolModel is the rule of TaggedPool, the same as ABAPool's.
var TaggedPoolModel = ABAPoolModel

// TaggedPool is ABAPool with a version tag in the head word: the head holds
// the top node's index in its low 16 bits and a count of the changes made
// to the stack in its high 48, so a compare-and-swap succeeds only if the
// stack has not changed at all since its head was read.
type TaggedPool struct {
	tokens taggedStack
	spare  taggedStack
	depth  []atomic.Int32
}

var _ budget.Budget = (*TaggedPool)(nil)

// NewTaggedPool returns a full TaggedPool. It reads no clock.
func NewTaggedPool(budget.Clock) budget.Budget {
	p := &TaggedPool{depth: make([]atomic.Int32, poolNodes)}
	p.tokens.next = make([]atomic.Uint32, poolNodes)
	p.spare.next = make([]atomic.Uint32, poolNodes)
	for i := uint32(1); i <= poolTokens; i++ {
		p.tokens.next[i].Store(i - 1)
		p.depth[i].Store(int32(i))
	}
	for i := uint32(poolTokens + 2); i < poolNodes; i++ {
		p.spare.next[i].Store(i - 1)
	}
	p.tokens.head.Store(poolTokens)
	p.spare.head.Store(poolNodes - 1)
	return p
}

const (
	indexBits = 16
	indexMask = 1<<indexBits - 1
)

// A node index must fit in the head's low bits.
var _ [indexMask - poolNodes]struct{}

// taggedStack is a Treiber stack whose head packs the index of the top
// node with a version that every successful change increments. A 48-bit
// version would have to wrap around exactly while one goroutine sits
// between its load and its CAS for the ABA to come back.
type taggedStack struct {
	head atomic.Uint64
	next []atomic.Uint32 // by node: the node below it on this stack
}

// bump returns the head word after h with top node i.
func bump(h uint64, i uint32) uint64 { return (h>>indexBits+1)<<indexBits | uint64(i) }

func (s *taggedStack) pop() uint32 {
	for {
		h := s.head.Load()
		top := uint32(h & indexMask)
		if top == nilNode {
			return nilNode
		}
		next := s.next[top].Load() // stale if top moved since h: then the CAS fails
		if s.head.CompareAndSwap(h, bump(h, next)) {
			return top
		}
	}
}

func (s *taggedStack) push(i uint32) {
	for {
		h := s.head.Load()
		s.next[i].Store(uint32(h & indexMask))
		if s.head.CompareAndSwap(h, bump(h, i)) {
			return
		}
	}
}

func (s *taggedStack) pushBelow(depth []atomic.Int32, i uint32, limit int32) bool {
	for {
		h := s.head.Load()
		top := uint32(h & indexMask)
		d := depthOf(depth, top) // stale if top moved since h: then the CAS fails
		if d >= limit {
			// A node being pushed has its depth written before its CAS,
			// so d may be one that never held; answer full only if the
			// stack did not change since h was read.
			if s.head.Load() == h {
				return false
			}
			continue
		}
		s.next[i].Store(top)
		depth[i].Store(d + 1)
		if s.head.CompareAndSwap(h, bump(h, i)) {
			return true
		}
	}
}

// Request does nothing: a first attempt is free.
func (p *TaggedPool) Request() {}

// Retry takes a token for a retry of a retry kind, if one is left.
func (p *TaggedPool) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	n := p.tokens.pop()
	if n == nilNode {
		return false
	}
	p.spare.push(n)
	return true
}

// Success gives the token of a successful retry back, up to the capacity.
func (p *TaggedPool) Success(kind budget.Kind) {
	if !kind.IsRetry() {
		return
	}
	n := p.spare.pop()
	for n == nilNode { // every spare node is held by a call in progress
		runtime.Gosched()
		n = p.spare.pop()
	}
	if !p.tokens.pushBelow(p.depth, n, poolTokens) {
		p.spare.push(n)
	}
}

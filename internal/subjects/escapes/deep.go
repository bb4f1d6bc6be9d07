package escapes

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// This file holds two mutants whose bug shows only when one call is
// preempted three times, and their twins. All four share one design, the
// kind a team writes for speed: a token bucket kept in atomic words, with
// an optimistic fast path (read, compute, compare-and-swap) tried twice,
// and a slow path under a mutex for a call that lost both races, so that a
// contended call stops spinning. They differ only in their steps.
//
// # Counting preemptions
//
// A step is one sync/atomic operation or one mutex operation. A
// preemption is a switch away from a goroutine in the middle of a call
// (it has made a step of the call and has not returned) while it could go
// on. A goroutine that has returned from a call, or that waits for the
// mutex, gives way for free; so the other goroutines may run whole calls
// at every preemption point at no cost, which only makes "two are not
// enough" the stronger claim. A window is the stretch of other
// goroutines' steps that a preemption lets in.
//
// Two facts carry every proof below.
//
//   - (F1) In one goroutine, nothing comes between two steps of a call
//     unless the call is preempted there. So if a word that the call read
//     differs at its next step (a compare-and-swap fails, a version moved),
//     the call was preempted between the two: that attempt spent one
//     preemption of the call.
//   - (F2) A compare-and-swap of the balance that succeeds is an atomic
//     read-modify-write of it: its call takes effect at that instant, on
//     the balance it read. A call that decides without writing (a denied
//     retry, a success on a full bucket) takes effect at the read that saw
//     the balance. A read followed by a plain Store is a read-modify-write
//     too, provided no other goroutine's step comes between them.
//
// So a fast path's own write never goes wrong; only a slow path's
// read-then-store can, and only if it is preempted between the two; and a
// call reaches its slow path only after two failed attempts, each of
// which costs a preemption by (F1) (SplitSeqlock's attempts can also fail
// on an odd version; its comment deals with that).

// fastTries is how many optimistic attempts a call makes before it takes
// the slow path.
const fastTries = 2

// deepRule is the sequential rule of a model.TokenBucket without refill, on
// a balance in milli-tokens.
type deepRule struct{ m model.TokenBucket }

func newDeepRule(m model.TokenBucket) deepRule {
	if err := m.Validate(); err != nil {
		panic(fmt.Sprintf("escapes: %v", err))
	}
	if m.RefillPerSecond != 0 {
		panic("escapes: the budgets of deep.go have no clock: RefillPerSecond must be 0")
	}
	return deepRule{m: m}
}

// A deepOp is what a call asks of the balance: a retry's charge or a
// success's credit, in milli-tokens.
type deepOp struct {
	retry  bool
	amount int64
}

func (r deepRule) cost(k budget.Kind) int64 {
	if k == budget.Throttled {
		return r.m.ThrottledCost
	}
	return r.m.TransientCost
}

// retryOp is the charge of a retry of kind k (a retry kind).
func (r deepRule) retryOp(k budget.Kind) deepOp { return deepOp{retry: true, amount: r.cost(k)} }

// successOp is the credit of a success of kind k: the cost of a retry kind
// (unless NoRefund), SuccessBonus otherwise.
func (r deepRule) successOp(k budget.Kind) deepOp {
	if k.IsRetry() && !r.m.NoRefund {
		return deepOp{amount: r.cost(k)}
	}
	return deepOp{amount: r.m.SuccessBonus}
}

// next returns the balance after op from balance t, whether it differs
// from t (a write), and, for a retry, whether it is granted.
func (r deepRule) next(op deepOp, t int64) (n int64, write, granted bool) {
	if op.retry {
		if t < op.amount {
			return t, false, false
		}
		return t - op.amount, true, true
	}
	n = min(r.m.Capacity, t+op.amount)
	return n, n != t, false
}

// A deepView is what a read step saw: the balance, and the word it was
// validated with (a version, or the packed word).
type deepView struct {
	word uint64
	bal  int64
}

// fallbackSteps are the steps of the shared design. fallbackUpdate is made
// of them, and the tests play them one at a time to interleave calls by
// hand.
type fallbackSteps interface {
	// fastRead reads the balance for one optimistic attempt; false means
	// the attempt has failed already (a write section was open or closed
	// meanwhile).
	fastRead() (deepView, bool)
	// fastPublish tries to replace what v saw with balance n.
	fastPublish(v deepView, n int64) bool
	lock()
	unlock()
	// slowRead reads the balance under the mutex.
	slowRead() deepView
	// slowPublish replaces what v saw with balance n; false means it has
	// changed, and the slow path reads again.
	slowPublish(v deepView, n int64) bool
	// balance reads the balance, for the tests.
	balance() int64
}

// fallbackUpdate applies op: at most fastTries optimistic attempts, then
// the slow path under the mutex. It returns a retry's answer.
func fallbackUpdate[S fallbackSteps](s S, r deepRule, op deepOp) bool {
	for range fastTries {
		v, ok := s.fastRead()
		if !ok {
			continue
		}
		n, write, granted := r.next(op, v.bal)
		if !write {
			return granted
		}
		if s.fastPublish(v, n) {
			return granted
		}
	}
	s.lock()
	defer s.unlock()
	for {
		v := s.slowRead()
		n, write, granted := r.next(op, v.bal)
		if !write {
			return granted
		}
		if s.slowPublish(v, n) {
			return granted
		}
	}
}

// ---------------------------------------------------------------------------
// Class 7a: spin, then lock. SpinThenStore (the mutant), SpinThenCAS (the
// twin).

// SpinThenCASModel is the rule SpinThenCAS follows: 4 tokens; a retry of
// either kind costs 1 and is refunded when it succeeds; a successful first
// attempt earns nothing.
var SpinThenCASModel = model.TokenBucket{Capacity: 4_000, TransientCost: 1_000, ThrottledCost: 1_000}

// SpinThenStoreModel is the rule SpinThenStore claims to follow: the same.
var SpinThenStoreModel = SpinThenCASModel

// SpinThenStore keeps the balance in one atomic word. A call reads it and
// swaps in the new balance with a compare-and-swap, twice at most; a call
// that lost both races takes the mutex, so that contended calls queue
// instead of spinning, and finishes there.
//
// BUG (deliberate): under the mutex the slow path reads the balance and
// writes the new one with a plain Store, as if the mutex made it the only
// writer. It keeps out other slow paths only: a fast path's
// compare-and-swap between the slow path's read and its Store is
// overwritten, and the charge (or credit) it made is lost.
//
// Why two preemptions never show it. By (F2) the only write that can go
// wrong is a slow path's Store with another goroutine's step between its
// read and it; the slow path holds the mutex and waits for nothing, so
// that is a preemption of its call (window 3). The call got there by two
// failed compare-and-swaps, each of which, by (F1), needed a preemption
// of the same call between that attempt's read and its swap (windows 1
// and 2, one in each attempt). So the bug needs one call preempted three
// times, in three separate windows. With at most two preemptions, either
// no call reaches the slow path, or the one that does has spent both on
// its failed attempts and runs read-then-Store uninterrupted: every write
// is then atomic, and every call takes effect at one instant (F2).
//
// One three-preemption schedule, goroutines V and G, 4 tokens:
//
//	V Retry(transient): fast read 4                   preempted (1)
//	  window 1, G Retry(transient): 4→3, granted
//	V: swap 4→3 fails; fast read 3                     preempted (2)
//	  window 2, G Success(transient): 3→4
//	V: swap 3→2 fails; lock; slow read 4               preempted (3)
//	  window 3, G Retry(transient): 4→3, granted (its fast path)
//	V: Store 3, unlock; granted
//
// The bucket holds 3 where the model, in any order of these calls, holds
// 2 (three retries granted, one refunded): the next three retries are all
// granted where the model grants two (TestDeepSpinThenStore plays this
// schedule step by step). V makes 4 calls, G 3.
//
// In sequential use no swap ever fails, the slow path is never taken, and
// it answers as its model says.
type SpinThenStore struct {
	rule   deepRule
	tokens atomic.Int64 // milli-tokens
	mu     sync.Mutex   // slow paths
}

var _ budget.Budget = (*SpinThenStore)(nil)

// NewSpinThenStore returns a full bucket following m, which must have no
// refill (see SpinThenStoreModel).
func NewSpinThenStore(m model.TokenBucket) *SpinThenStore {
	b := &SpinThenStore{rule: newDeepRule(m)}
	b.tokens.Store(m.Capacity)
	return b
}

func (b *SpinThenStore) fastRead() (deepView, bool) { return deepView{bal: b.tokens.Load()}, true }
func (b *SpinThenStore) fastPublish(v deepView, n int64) bool {
	return b.tokens.CompareAndSwap(v.bal, n)
}
func (b *SpinThenStore) lock()              { b.mu.Lock() }
func (b *SpinThenStore) unlock()            { b.mu.Unlock() }
func (b *SpinThenStore) slowRead() deepView { return deepView{bal: b.tokens.Load()} }
func (b *SpinThenStore) balance() int64     { return b.tokens.Load() }

// slowPublish stores n: the bug. "We hold the mutex" excludes other slow
// paths, not fast paths.
func (b *SpinThenStore) slowPublish(_ deepView, n int64) bool {
	b.tokens.Store(n)
	return true
}

// Request does nothing: a first attempt is free.
func (b *SpinThenStore) Request() {}

// Retry charges a retry of a retry kind, if the balance covers it.
func (b *SpinThenStore) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	return fallbackUpdate(b, b.rule, b.rule.retryOp(kind))
}

// Success refunds a successful retry, or credits the bonus of a successful
// first attempt, up to the capacity.
func (b *SpinThenStore) Success(kind budget.Kind) {
	if op := b.rule.successOp(kind); op.amount > 0 {
		fallbackUpdate(b, b.rule, op)
	}
}

// SpinThenCAS is SpinThenStore with the slow path's write a
// compare-and-swap too: under the mutex it reads and swaps until the swap
// holds (the mutex still keeps slow paths from fighting each other, and a
// slow path's swap fails only when some fast path's swap has succeeded, so
// the bucket as a whole makes progress). Every write is a compare-and-swap
// of the one word, so by (F2) each call takes effect at its successful
// swap, or at the read that decided it without a write: it follows
// SpinThenCASModel (or the model it is built with) under any concurrency.
type SpinThenCAS struct {
	rule   deepRule
	tokens atomic.Int64 // milli-tokens
	mu     sync.Mutex   // slow paths
}

var _ budget.Budget = (*SpinThenCAS)(nil)

// NewSpinThenCAS returns a full bucket following m, which must have no
// refill (see SpinThenCASModel).
func NewSpinThenCAS(m model.TokenBucket) *SpinThenCAS {
	b := &SpinThenCAS{rule: newDeepRule(m)}
	b.tokens.Store(m.Capacity)
	return b
}

func (b *SpinThenCAS) fastRead() (deepView, bool) { return deepView{bal: b.tokens.Load()}, true }
func (b *SpinThenCAS) fastPublish(v deepView, n int64) bool {
	return b.tokens.CompareAndSwap(v.bal, n)
}
func (b *SpinThenCAS) lock()              { b.mu.Lock() }
func (b *SpinThenCAS) unlock()            { b.mu.Unlock() }
func (b *SpinThenCAS) slowRead() deepView { return deepView{bal: b.tokens.Load()} }
func (b *SpinThenCAS) balance() int64     { return b.tokens.Load() }
func (b *SpinThenCAS) slowPublish(v deepView, n int64) bool {
	return b.tokens.CompareAndSwap(v.bal, n)
}

// Request does nothing: a first attempt is free.
func (b *SpinThenCAS) Request() {}

// Retry charges a retry of a retry kind, if the balance covers it.
func (b *SpinThenCAS) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	return fallbackUpdate(b, b.rule, b.rule.retryOp(kind))
}

// Success refunds a successful retry, or credits the bonus of a successful
// first attempt, up to the capacity.
func (b *SpinThenCAS) Success(kind budget.Kind) {
	if op := b.rule.successOp(kind); op.amount > 0 {
		fallbackUpdate(b, b.rule, op)
	}
}

// ---------------------------------------------------------------------------
// Class 7b: a seqlock writer. SplitSeqlock (the mutant), PackedSeqlock (the
// twin).

// PackedSeqlockModel is the rule PackedSeqlock follows: 5 tokens, 2 a
// transient retry, 1 a throttled retry, refunded on success; half a token
// for a successful first attempt.
var PackedSeqlockModel = model.TokenBucket{Capacity: 5_000, TransientCost: 2_000, ThrottledCost: 1_000, SuccessBonus: 500}

// SplitSeqlockModel is the rule SplitSeqlock claims to follow: the same.
var SplitSeqlockModel = PackedSeqlockModel

// SplitSeqlock guards its balance with a seqlock-style version. A fast
// attempt reads the version (odd: a writer's section is open, and the
// attempt fails), reads the balance, re-reads the version (changed: the
// attempt fails), and publishes with a compare-and-swap of the balance. A
// call whose two attempts failed becomes the writer: it takes the writers'
// mutex, reads the balance and computes the new one, then opens a write
// section (version odd), stores the balance and closes it (version even).
// The team's reasoning: fast paths validate the version, so none publishes
// while a section is open, and the writer, alone under the mutex, may
// Store; the section is kept short by computing before it opens.
//
// BUG (deliberate): the version and the balance are separate words. The
// fast path's compare-and-swap covers only the balance, and the writer's
// section opens with a plain increment of the version only; neither sees
// the other's word. The writer's read comes before its section opens, so a
// fast path that publishes between the writer's read and its section is
// not stood aside, and the writer's Store overwrites it. (A fast path that
// validated just before the section opened and swaps inside it is
// overwritten too; that takes a preemption of the fast path as well as
// the writer's three, so it is not the shallowest way.)
//
// Why two preemptions never show it. By (F2) the only write that can go
// wrong is a writer's Store with another goroutine's step between the
// writer's read and its Store: a preemption of the writer's call there
// (it holds the mutex and waits for nothing). A call becomes the writer
// after two failed attempts. Take the first call E that ever opens a
// section: before that the version is 0 throughout, so neither of E's
// attempts failed on the version; both failed their swap, and by (F1)
// each spent a preemption of E. So a writer exists only after two
// preemptions, and the buggy writer needs one more: E's third, or, if the
// buggy writer is a later one, one of its own on top of E's two. Either
// way three. With at most two, E (if any) has spent both and runs
// read-open-Store-close without a step of anyone else between; no other
// call becomes a writer (each of its failed attempts would need a
// preemption of its own, or of E inside E's section); and every write is
// atomic (F2).
//
// With exactly three, the only way is E preempted three times: two
// failed attempts and the window between its read and its section. (A
// writer preempted inside its section lets other calls fail on the odd
// version without being preempted, but the call that is then overwritten
// or becomes the next writer needs a fourth preemption.)
//
// One such schedule, goroutines V and G, 5 tokens:
//
//	V Retry(transient): version 0, read 5, version 0   preempted (1)
//	  window 1, G Retry(throttled): 5→4, granted
//	V: swap 5→3 fails; version 0, read 4, version 0     preempted (2)
//	  window 2, G Retry(transient): 4→2, granted
//	V: swap 4→2 fails; lock; read 2                     preempted (3)
//	  window 3, G Success(transient): version 0, read 2, version 0, swap 2→4
//	V: version 1, Store 0, version 2, unlock; granted
//
// The refund of window 3 is lost: the bucket holds 0 where the model, in
// any order of these calls, holds 2, and G's fourth call, Retry(transient),
// is denied where the model grants it (TestDeepSeqlock plays this schedule
// step by step). V makes 1 call, G 4.
//
// In sequential use no attempt ever fails, no section ever opens, and it
// answers as its model says.
type SplitSeqlock struct {
	rule deepRule
	seq  atomic.Uint64 // the version: odd while a write section is open
	bal  atomic.Int64  // milli-tokens
	mu   sync.Mutex    // writers
}

var _ budget.Budget = (*SplitSeqlock)(nil)

// NewSplitSeqlock returns a full bucket following m, which must have no
// refill (see SplitSeqlockModel).
func NewSplitSeqlock(m model.TokenBucket) *SplitSeqlock {
	b := &SplitSeqlock{rule: newDeepRule(m)}
	b.bal.Store(m.Capacity)
	return b
}

// fastRead reads the version, the balance, and the version again.
func (b *SplitSeqlock) fastRead() (deepView, bool) {
	s := b.seq.Load()
	if s&1 != 0 {
		return deepView{}, false // a writer's section is open: stand aside
	}
	t := b.bal.Load()
	if b.seq.Load() != s {
		return deepView{}, false
	}
	return deepView{word: s, bal: t}, true
}

// fastPublish swaps the balance only: the version it validated is not
// part of the swap.
func (b *SplitSeqlock) fastPublish(v deepView, n int64) bool {
	return b.bal.CompareAndSwap(v.bal, n)
}

func (b *SplitSeqlock) lock()          { b.mu.Lock() }
func (b *SplitSeqlock) unlock()        { b.mu.Unlock() }
func (b *SplitSeqlock) balance() int64 { return b.bal.Load() }

// slowRead reads the balance before the section opens: the bug.
func (b *SplitSeqlock) slowRead() deepView { return deepView{bal: b.bal.Load()} }

// slowPublish opens a write section, stores n and closes the section.
func (b *SplitSeqlock) slowPublish(_ deepView, n int64) bool {
	b.seq.Add(1)
	b.bal.Store(n)
	b.seq.Add(1)
	return true
}

// Request does nothing: a first attempt is free.
func (b *SplitSeqlock) Request() {}

// Retry charges a retry of a retry kind, if the balance covers it.
func (b *SplitSeqlock) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	return fallbackUpdate(b, b.rule, b.rule.retryOp(kind))
}

// Success refunds a successful retry, or credits the bonus of a successful
// first attempt, up to the capacity.
func (b *SplitSeqlock) Success(kind budget.Kind) {
	if op := b.rule.successOp(kind); op.amount > 0 {
		fallbackUpdate(b, b.rule, op)
	}
}

// PackedSeqlock is SplitSeqlock with the version and the balance in one
// atomic word (version in the high 32 bits, milli-tokens in the low 32;
// a capacity is at most 10^9 milli-tokens). A fast attempt reads the word
// (odd version: it fails) and publishes with a compare-and-swap of the
// whole word, so it fails once a section has opened. The writer, under
// the mutex, reads the word and opens its section with a compare-and-swap
// from that very word to the same balance with the version odd; if a fast
// path has published since, the swap fails and the writer reads again.
// Once the section is open every fast attempt fails, so the writer's Store
// of the new balance (version even again) overwrites nothing.
//
// Every call takes effect at one instant: a fast attempt at its successful
// swap; a writer at the swap that opens its section (the balance is n from
// then on, and nobody reads it until the Store); a call that decides
// without a write at the read that decided it. So it follows
// PackedSeqlockModel (or the model it is built with) under any
// concurrency. The version wraps after 2^31 sections, which does no harm:
// a swap that succeeds on an equal word publishes from the balance that
// word holds.
type PackedSeqlock struct {
	rule  deepRule
	state atomic.Uint64 // version<<32 | milli-tokens
	mu    sync.Mutex    // writers
}

var _ budget.Budget = (*PackedSeqlock)(nil)

const balMask = 1<<32 - 1

// NewPackedSeqlock returns a full bucket following m, which must have no
// refill (see PackedSeqlockModel).
func NewPackedSeqlock(m model.TokenBucket) *PackedSeqlock {
	b := &PackedSeqlock{rule: newDeepRule(m)}
	b.state.Store(uint64(m.Capacity))
	return b
}

func (b *PackedSeqlock) fastRead() (deepView, bool) {
	w := b.state.Load()
	if w>>32&1 != 0 {
		return deepView{}, false // a writer's section is open: stand aside
	}
	return deepView{word: w, bal: int64(w & balMask)}, true
}

// fastPublish swaps the whole word, version included.
func (b *PackedSeqlock) fastPublish(v deepView, n int64) bool {
	return b.state.CompareAndSwap(v.word, v.word&^balMask|uint64(n))
}

func (b *PackedSeqlock) lock()          { b.mu.Lock() }
func (b *PackedSeqlock) unlock()        { b.mu.Unlock() }
func (b *PackedSeqlock) balance() int64 { return int64(b.state.Load() & balMask) }

func (b *PackedSeqlock) slowRead() deepView {
	w := b.state.Load() // even: only writers open sections, and we hold the mutex
	return deepView{word: w, bal: int64(w & balMask)}
}

// slowPublish opens the section from the word it read, or fails, then
// stores n and closes it.
func (b *PackedSeqlock) slowPublish(v deepView, n int64) bool {
	if !b.state.CompareAndSwap(v.word, v.word+1<<32) {
		return false
	}
	b.state.Store((v.word>>32+2)<<32 | uint64(n))
	return true
}

// Request does nothing: a first attempt is free.
func (b *PackedSeqlock) Request() {}

// Retry charges a retry of a retry kind, if the balance covers it.
func (b *PackedSeqlock) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	return fallbackUpdate(b, b.rule, b.rule.retryOp(kind))
}

// Success refunds a successful retry, or credits the bonus of a successful
// first attempt, up to the capacity.
func (b *PackedSeqlock) Success(kind budget.Kind) {
	if op := b.rule.successOp(kind); op.amount > 0 {
		fallbackUpdate(b, b.rule, op)
	}
}

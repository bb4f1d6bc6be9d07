package budgettest_test

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

// This file is a worked example of writing a model: a budget that none of
// the model package's models describes, tower's TpsBudget, ported to Go,
// and a model of the rule it means to follow. tower_test.go puts the two
// through the suite.

// tpsSlots is how many slots tower's TpsBudget keeps: a fixed 10.
const tpsSlots = 10

// tpsBudget is a Go port of tower's retry budget,
// tower::retry::budget::TpsBudget (tower/src/retry/budget/tps_budget.rs),
// as a budget.Budget: Request deposits, Retry of a retry kind withdraws,
// Success does nothing.
//
// tower's rule. A deposit adds deposit to the current slot, a withdrawal
// of withdraw is granted when the slots' sum plus reserve is at least
// withdraw (>=, as tower's try_get has it), and then subtracts it. The
// amounts come from retry_percent: (0, 1) for 0; (1, ⌊1/retry_percent⌋)
// up to 1; (1000, ⌊1000/retry_percent⌋) above, computed in float32 and
// truncated to an integer, as tower's `as isize` does. The truncation is
// tower issue #857: retry_percent 0.3 gives a withdrawal of 3, one retry
// per 3 requests (33%), not 30%. reserve is min_per_sec × whole seconds
// of ttl × withdraw.
//
// tower's window. Ten slots of ttl/10 each, in a ring, and a writer that
// holds the current slot's net. A call that finds at least one slot width
// elapsed since the current slot began commits the writer to the ring
// (over the oldest slot), zeroes one more slot per further width elapsed,
// and starts the next slot at the call's instant: slots follow the calls,
// not a grid, and a slot lasts from one rotation to the next. The sum
// counts the writer and all ten ring slots, the oldest included until the
// next rotation overwrites it, so a deposit counts for its own slot and
// ten more: about ttl plus a slot. A reading earlier than the current
// slot's start rotates nothing (tower's saturating_duration_since).
//
// What the port does not copy: tower reads the sum and subtracts the
// withdrawal in two separate atomic operations, outside its lock (a
// check-then-act, a race of its own). The port holds one mutex for the
// whole call, so that it differs from the model only where #857 is.
type tpsBudget struct {
	// Read-only after construction.
	clock             budget.Clock
	width             time.Duration // ttl / 10: tower's `window`
	deposit, withdraw int64         // tower's deposit_amount, withdraw_amount
	reserve           int64

	mu     sync.Mutex
	start  time.Duration // when the current slot began: tower's Generation.time
	index  int           // where the writer is committed next: Generation.index
	ring   [tpsSlots]int64
	writer int64
}

var _ budget.Budget = (*tpsBudget)(nil)

// newTpsBudget ports TpsBudget::new(ttl, min_per_sec, retry_percent), on
// clock. It panics on the parameters tower's assertions reject: a ttl
// outside [1s, 60s], a retry_percent outside [0, 1000], a min_per_sec of
// 2^31 - 1 or more.
func newTpsBudget(ttl time.Duration, minPerSec uint32, retryPercent float32, clock budget.Clock) *tpsBudget {
	switch {
	case ttl < time.Second || ttl > time.Minute:
		panic("tps: ttl must be in [1s, 60s], got " + ttl.String())
	case !(retryPercent >= 0 && retryPercent <= 1000): // NaN fails too
		panic("tps: retry_percent must be in [0, 1000], got " + strconv.FormatFloat(float64(retryPercent), 'g', -1, 32))
	case minPerSec >= math.MaxInt32:
		panic("tps: min_per_sec must be below 2^31 - 1, got " + strconv.FormatUint(uint64(minPerSec), 10))
	}
	var deposit, withdraw int64
	switch {
	case retryPercent == 0:
		deposit, withdraw = 0, 1
	case retryPercent <= 1:
		deposit, withdraw = 1, truncate(1/retryPercent) // tower#857, kept on purpose
	default:
		deposit, withdraw = 1000, truncate(1000/retryPercent)
	}
	now := clock.Now()
	return &tpsBudget{
		clock:    clock,
		width:    ttl / tpsSlots,
		deposit:  deposit,
		withdraw: withdraw,
		reserve:  satMul(satMul(int64(minPerSec), int64(ttl/time.Second)), withdraw),
		start:    now,
	}
}

// truncate converts f >= 0 to an integer as Rust's `as isize` does on a
// 64-bit target: toward zero, saturating at the largest isize.
func truncate(f float32) int64 {
	if f >= 0x1p63 {
		return math.MaxInt64
	}
	return int64(f)
}

// satMul and satAdd are Rust's saturating_mul and saturating_add, for the
// reserve and the sum.
func satMul(a, b int64) int64 {
	if a != 0 && b != 0 && (a > math.MaxInt64/b || a < math.MinInt64/b) {
		if (a < 0) != (b < 0) {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	return a * b
}

func satAdd(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// Request deposits: tower's Budget::deposit, made once per first attempt.
// (When to deposit is the caller's choice in tower: the Budget trait only
// provides deposit and withdraw. TpsBudget's documentation counts retries
// against "calls to deposit", and this port deposits per request.)
func (b *tpsBudget) Request() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire()
	b.writer += b.deposit
}

// Retry withdraws for a retry kind: tower's Budget::withdraw. Any other
// kind is denied and charges nothing, as the Budget contract says.
func (b *tpsBudget) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire()
	if b.sum() < b.withdraw {
		return false
	}
	b.writer -= b.withdraw
	return true
}

// Success does nothing: tower's budget is told of deposits and
// withdrawals only.
func (b *tpsBudget) Success(budget.Kind) {}

// expire is tower's TpsBudget::expire. b.mu must be held.
func (b *tpsBudget) expire() {
	now := b.clock.Now()
	if now <= b.start {
		return // tower's saturating_duration_since gives 0: not expired
	}
	diff := uint64(now) - uint64(b.start) // the true distance, even across 0
	width := uint64(b.width)
	if diff < width {
		return
	}
	b.ring[b.index] = b.writer
	b.writer = 0
	// tower zeroes one slot per width beyond the first, in a loop that
	// runs while the remaining diff is above a width: (diff-1)/width
	// times. The port stops after a full turn of the ring, where more
	// turns change nothing.
	more := (diff - 1) / width
	idx := (b.index + 1) % tpsSlots
	for range min(more, tpsSlots) {
		b.ring[idx] = 0
		idx = (idx + 1) % tpsSlots
	}
	b.index = int((uint64(b.index) + 1 + more%tpsSlots) % tpsSlots)
	b.start = now
}

// sum is tower's TpsBudget::sum: the writer, the ring and the reserve.
// b.mu must be held.
func (b *tpsBudget) sum() int64 {
	var ring int64
	for _, v := range b.ring {
		ring = satAdd(ring, v)
	}
	return satAdd(satAdd(b.writer, ring), b.reserve)
}

// retryUnit is what one retry costs in the model: a million units, so that
// a request's deposit of PPM units is worth PPM/1e6 retries exactly.
const retryUnit = 1_000_000

// tpsRule is a model of the rule tower's TpsBudget means to follow: each
// request allows retry_percent of a retry, exactly, over the same window
// as tower's, on top of a reserve of min_per_sec × ttl retries.
//
// Decision: what the model is of. It takes tower's window as given, slots
// that follow the calls and a window of ten past slots and the current
// one, and states the ratio the way tower's documentation does rather
// than the way its integers compute it. So it agrees with the port
// wherever tower's division is exact (1/retry_percent up to 1, as for
// 0.1, 0.2, 0.25 or 0.5; 1000/retry_percent above) and catches #857
// everywhere else. A model with a grid-aligned window of exactly ttl would
// also be a fair statement of intent, but it would fail the port on timing
// at every retry_percent, and the failure would not point at #857.
//
// Decision: units. Integers, with no rounding anywhere: a retry costs
// retryUnit, a request deposits PPM (retry_percent × 1e6), and the reserve
// is MinPerSec × whole seconds of TTL × retryUnit. Where the port's
// amounts are exact they are the model's divided by one factor, so the two
// answer alike.
type tpsRule struct {
	TTL       time.Duration // in [1s, 60s]
	MinPerSec int64         // in [0, 2^31 - 1)
	PPM       int64         // retry_percent in parts per million, in [0, 1e9]
}

// tpsIntended returns the model of what TpsBudget::new(ttl, minPerSec,
// retryPercent) is meant to do.
func tpsIntended(ttl time.Duration, minPerSec uint32, retryPercent float32) tpsRule {
	return tpsRule{TTL: ttl, MinPerSec: int64(minPerSec), PPM: int64(math.Round(float64(retryPercent) * 1e6))}
}

// tpsState is a state of tpsRule.
//
// Decision: what state to keep. The clock (model.Clock, as every model's
// state holds one), when the current slot began, the current slot's net,
// and the ten past slots. Nothing else: the reserve and the amounts are
// parameters, in tpsRule, and the sum is computed, not stored.
//
// Decision: one representation per behaviour, so that == can serve in
// Equal. The port keeps its slots in a ring with a moving index; the model
// keeps them oldest first, so the same window is always the same array,
// whatever the ring's turn. A slot that expires is shifted out, and the
// slots that come in empty are zero: no expired count stays behind to tell
// two equal windows apart. Only Clock.Seen is left that behaviour does not
// need (see Equal).
type tpsState struct {
	Clock model.Clock
	Start time.Duration   // when the current slot began (at or before Clock.Seen)
	Past  [tpsSlots]int64 // the ten slots before the current one, oldest first
	Cur   int64           // the current slot: PPM per request, -retryUnit per retry
}

var (
	_ model.Model[tpsState]   = tpsRule{}
	_ model.Validator         = tpsRule{}
	_ model.Timed             = tpsRule{}
	_ model.Starter[tpsState] = tpsRule{}
	// Not a model.Resetter: a TpsBudget lives in memory, and loses its
	// state only with its process. The checks then never give Reset.
	// Not a model.Balanced: TpsBudget has no balance to compare with.
)

// Validate accepts the parameters tower accepts. The ranges also keep the
// arithmetic far from overflow: the reserve is at most about 1.3e17 units
// and a request deposits at most 1e9.
func (m tpsRule) Validate() error {
	switch {
	case m.TTL < time.Second || m.TTL > time.Minute:
		return fmt.Errorf("%w: tpsRule.TTL must be in [1s, 60s], got %v", model.ErrInvalid, m.TTL)
	case m.MinPerSec < 0 || m.MinPerSec >= math.MaxInt32:
		return fmt.Errorf("%w: tpsRule.MinPerSec must be in [0, 2^31 - 1), got %d", model.ErrInvalid, m.MinPerSec)
	case m.PPM < 0 || m.PPM > 1000*retryUnit:
		return fmt.Errorf("%w: tpsRule.PPM must be in [0, 1e9], got %d", model.ErrInvalid, m.PPM)
	}
	return nil
}

// Timing returns the slot width, around which answers change, and the
// ttl, the longest step after which anything is still counted.
func (m tpsRule) Timing() (scale, horizon time.Duration) {
	return m.TTL / tpsSlots, m.TTL
}

func (m tpsRule) reserve() int64 { return m.MinPerSec * int64(m.TTL/time.Second) * retryUnit }

// Init returns the state of a budget built on a clock reading 0.
func (m tpsRule) Init() tpsState { return m.InitAt(0) }

// InitAt returns the state of a budget built on a clock reading now: its
// first slot begins there, as tower's does at construction. It lets the
// Edges check start the port at negative instants and near the ends of
// int64.
func (m tpsRule) InitAt(now time.Duration) tpsState {
	return tpsState{Clock: model.Clock{Now: now, Seen: now}, Start: now}
}

// Step applies op to s, which it never changes: s is a value, and so is
// every array in it.
//
// Decision: how to answer every input. Retry of a kind that is not a retry
// kind is denied and changes nothing, not even what the clock has seen, as
// the Budget contract says (and the port, which asks tower nothing then).
// Success changes nothing. Reset, AttemptEnd and CallEnd never come: the
// model is neither a model.Resetter nor a model.Structured.
func (m tpsRule) Step(s tpsState, op model.Op) (tpsState, bool) {
	switch op.Op {
	case model.Advance:
		// Moving the clock is all an Advance does; the slots move when a
		// call next observes it.
		s.Clock = s.Clock.Advance(op.D)
	case model.Request:
		s = m.rotate(s)
		s.Cur += m.PPM
	case model.Retry:
		if !op.Kind.IsRetry() {
			return s, false
		}
		s = m.rotate(s)
		if m.sum(s)+m.reserve() < retryUnit {
			return s, false
		}
		s.Cur -= retryUnit
		return s, true
	}
	return s, false
}

// rotate observes the clock and, when a slot width or more has passed
// since the current slot began, ends it: the window shifts by one slot for
// the current one and one for each further width passed, and the next
// slot begins now.
//
// The clock rule: Clock.Observe acts at the later of the reading and the
// latest reading seen, so a clock stepped back behind what the budget has
// seen rotates nothing, as tower's saturating_duration_since does.
func (m tpsRule) rotate(s tpsState) tpsState {
	s.Clock = s.Clock.Observe()
	width := uint64(m.TTL / tpsSlots)
	passed := uint64(s.Clock.Seen) - uint64(s.Start) // Start <= Seen: the true distance
	if passed < width {
		return s
	}
	shift := 1 + min((passed-1)/width, tpsSlots) // the current slot, and one per further width
	var next [tpsSlots]int64
	for i := range next {
		// The sequence Past, then Cur, then empty slots, shifted.
		switch j := uint64(i) + shift; {
		case j < tpsSlots:
			next[i] = s.Past[j]
		case j == tpsSlots:
			next[i] = s.Cur
		}
	}
	s.Past, s.Cur, s.Start = next, 0, s.Clock.Seen
	return s
}

// sum returns the net of the window's slots.
func (m tpsRule) sum(s tpsState) int64 {
	n := s.Cur
	for _, v := range s.Past {
		n += v
	}
	return n
}

// Equal reports whether a and b behave the same from now on.
//
// Decision: what Equal means. Two states are equal when every sequence of
// operations gets the same answers from both. With the slots normalized
// (see tpsState), == on the whole struct is nearly that, but it compares
// one field too many: Clock.Seen. A call either starts a slot at the
// reading it observes (Seen == Start) or finds less than a width passed
// (Seen - Start < width), so any reading at or behind Seen rotates
// nothing, whether the model counts it as Seen or not: Seen never changes
// an answer. Equal leaves it out, and Hash with it. (Comparing it too
// would be safe, only stricter: the Linearizable check would search some
// states twice. A looser Equal is the dangerous one.)
func (m tpsRule) Equal(a, b tpsState) bool {
	return a.Clock.Now == b.Clock.Now && a.Start == b.Start && a.Past == b.Past && a.Cur == b.Cur
}

// Hash hashes what Equal compares, with model.Hash.
func (m tpsRule) Hash(s tpsState) uint64 {
	w := make([]int64, 0, 3+tpsSlots)
	w = append(w, int64(s.Clock.Now), int64(s.Start), s.Cur)
	w = append(w, s.Past[:]...)
	return model.Hash(w...)
}

// DescribeState describes s for a failure report, in retries:
// "balance=1.3 (window 0.3 + reserve 1) slot since 0s now=50ms".
func (m tpsRule) DescribeState(s tpsState) string {
	retries := func(units int64) string { return strconv.FormatFloat(float64(units)/retryUnit, 'f', -1, 64) }
	return fmt.Sprintf("balance=%s (window %s + reserve %s) slot since %v %v",
		retries(m.sum(s)+m.reserve()), retries(m.sum(s)), retries(m.reserve()), s.Start, s.Clock)
}

// Write a model for a budget the model package does not describe, here
// tower's TpsBudget, and put the budget through the suite with it. The
// port (tpsBudget) keeps tower's integer arithmetic, truncation included;
// the model (tpsRule) states the ratio tower documents. Where
// 1/retry_percent is an integer they agree and the suite passes; at 0.3
// the port grants a third of the requests, and the suite fails it
// (tower#857; see TestTowerRetryPercentTruncation).
func Example_writingAModel() {
	_ = func(t *testing.T) { // func TestTpsBudget(t *testing.T)
		budgettest.Run(t, budgettest.Subject[tpsState]{
			Name:  "tower TpsBudget(1s, 1, 0.25)",
			Model: tpsIntended(time.Second, 1, 0.25), // Timing gives Scale and Horizon
			New: func(_ *testing.T, clock budget.Clock) budget.Budget {
				return newTpsBudget(time.Second, 1, 0.25, clock) // on the check's clock
			},
		})
	}

	// The model is an ordinary value: step it by hand beside the port,
	// 100 requests and then 100 retries at one instant.
	for _, pct := range []float32{0.25, 0.3} {
		port, m := newTpsBudget(time.Second, 0, pct, new(budget.ManualClock)), tpsIntended(time.Second, 0, pct)
		s := m.Init()
		var byPort, byModel int
		for range 100 {
			port.Request()
			s, _ = m.Step(s, model.OpRequest)
		}
		for range 100 {
			if port.Retry(budget.Transient) {
				byPort++
			}
			var granted bool
			if s, granted = m.Step(s, model.OpRetry(model.Transient)); granted {
				byModel++
			}
		}
		fmt.Printf("retry_percent %v: port %d retries, model %d; model state %s\n", pct, byPort, byModel, m.DescribeState(s))
	}
	// Output:
	// retry_percent 0.25: port 25 retries, model 25; model state balance=0 (window 0 + reserve 0) slot since 0s now=0s
	// retry_percent 0.3: port 33 retries, model 30; model state balance=0 (window 0 + reserve 0) slot since 0s now=0s
}

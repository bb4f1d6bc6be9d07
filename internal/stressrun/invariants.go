package stressrun

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/retrybudget/retrybudget/model"
)

// A Violation is a conservation invariant that a run broke.
type Violation struct {
	Rule  string // the invariant, in words
	At    Entry  // the grant at which it broke (zero for a balance read between phases)
	Got   string // what the log shows by then
	Bound string // the most the budget may have granted by then
}

func (v *Violation) Error() string {
	return fmt.Sprintf("%s\n  broken at %v (phase %d): %s, but at most %s", v.Rule, v.At.Operation, v.At.Phase, v.Got, v.Bound)
}

// sweep calls grant for every granted retry among entries (sorted by call
// stamp) in the order of their return stamps, after calling credit for
// every entry called no later than that return. A grant returned by then
// surely happened, and an entry called by then may have: so a bound built
// this way holds for every correct budget, however the calls interleaved.
func sweep(entries []Entry, credit func(e Entry), grant func(e Entry) error) error {
	grants := slices.DeleteFunc(slices.Clone(entries), func(e Entry) bool { return e.Op.Op != model.Retry || !e.Granted })
	slices.SortFunc(grants, func(a, b Entry) int { return int(a.Return - b.Return) })
	next := 0
	for _, g := range grants {
		for next < len(entries) && entries[next].Call <= g.Return {
			credit(entries[next])
			next++
		}
		if err := grant(g); err != nil {
			return err
		}
	}
	return nil
}

// segments splits the run into the stretches its invariants are checked
// over, each with the balance it started from (in milli-units): one stretch
// per phase when the run read the budget's balance between phases, or the
// whole run from start otherwise.
func (r *Run) segments(start func(phase int) int64) (segs [][]Entry, base []int64) {
	if r.Balance == nil {
		return [][]Entry{r.Entries}, []int64{start(0)}
	}
	segs = make([][]Entry, len(r.Clock))
	for _, e := range r.Entries { // in call order, so each segment is too
		segs[e.Phase] = append(segs[e.Phase], e)
	}
	for p := range r.Clock {
		base = append(base, int64(math.Round(r.Balance[p]*1000)))
	}
	return segs, base
}

// checkBalances checks that every balance read between phases is within
// [0, most].
func (r *Run) checkBalances(name string, most int64) error {
	for p, b := range r.Balance {
		if mb := int64(math.Round(b * 1000)); mb < 0 || mb > most {
			return &Violation{
				Rule:  name + ": 0 <= balance <= its maximum whenever no call is in flight",
				At:    Entry{Phase: p},
				Got:   fmt.Sprintf("a balance of %g before phase %d (after the last phase if %d is past it)", b, p, p),
				Bound: fmt.Sprintf("within [0, %s]", milli(most)),
			}
		}
	}
	return nil
}

// CheckTokenBucket checks that by every grant, the costs of the retries
// granted are at most the balance at the start, plus every credit
// (first-attempt bonus or refund) that may have been made by then. The
// start is the full bucket plus what refill may have added by the clock's
// reading, or, when the run read the budget's balance between phases, that
// balance, phase by phase; every balance read must be within [0, Capacity].
func (r *Run) CheckTokenBucket(m model.TokenBucket) error {
	if err := r.checkBalances("token bucket", m.Capacity); err != nil {
		return err
	}
	cost := func(k model.Kind) int64 {
		if k == model.Throttled {
			return m.ThrottledCost
		}
		return m.TransientCost
	}
	segs, bases := r.segments(func(int) int64 { return m.Capacity })
	for i, seg := range segs {
		var credits, granted int64
		err := sweep(seg, func(e Entry) {
			if e.Op.Op != model.Success {
				return
			}
			if e.Op.Kind.IsRetry() && !m.NoRefund {
				credits += cost(e.Op.Kind)
			} else {
				credits += m.SuccessBonus
			}
		}, func(e Entry) error {
			granted += cost(e.Op.Kind)
			base := bases[i]
			if r.Balance == nil {
				base += ceilRefill(m.RefillPerSecond, r.Clock[e.Phase])
			}
			if bound := base + credits; granted > bound {
				return &Violation{
					Rule:  "token bucket: granted cost <= starting balance + refill + credits",
					At:    e,
					Got:   fmt.Sprintf("%s tokens granted", milli(granted)),
					Bound: fmt.Sprintf("%s = %s + %s credited", milli(bound), milli(base), milli(credits)),
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// ceilRefill returns what a refill of perSecond milli-tokens may have added
// by elapsed, rounded up.
func ceilRefill(perSecond int64, elapsed time.Duration) int64 {
	if perSecond == 0 || elapsed <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(perSecond), uint64(elapsed))
	if hi >= uint64(time.Second) {
		return 1 << 62
	}
	q, rem := bits.Div64(hi, lo, uint64(time.Second))
	if q >= 1<<62 {
		return 1 << 62
	}
	if rem > 0 {
		q++
	}
	return int64(q)
}

// CheckRatio checks that by every grant, the retries granted in its window
// are at most max(Floor, Ratio × the requests that may have been made in
// that window + Reserve), the model's allowance.
func (r *Run) CheckRatio(m model.Ratio) error {
	width := int64(m.Window) / m.Slots
	slot := func(phase int) int64 {
		t := int64(r.Clock[phase])
		q := t / width
		if t%width < 0 {
			q--
		}
		return q
	}
	inWindow := func(h, s int64) bool { return uint64(h)-uint64(s) < uint64(m.Slots) }
	reqs := map[int64]int64{}
	grants := map[int64]int64{}
	return sweep(r.Entries, func(e Entry) {
		if e.Op.Op == model.Request {
			reqs[slot(e.Phase)]++
		}
	}, func(e Entry) error {
		h := slot(e.Phase)
		grants[h]++
		var nReqs, nGrants int64
		for s, n := range reqs {
			if inWindow(h, s) {
				nReqs += n
			}
		}
		for s, n := range grants {
			if inWindow(h, s) {
				nGrants += n
			}
		}
		hi, lo := bits.Mul64(uint64(nReqs), uint64(m.PPM))
		prop, _ := bits.Div64(hi, lo, 1_000_000)
		if allowed := max(m.Floor, int64(prop)+m.Reserve); nGrants > allowed {
			return &Violation{
				Rule:  "ratio: retries granted in a window <= max(floor, ratio × requests in it + reserve)",
				At:    e,
				Got:   fmt.Sprintf("%d retries granted in the window", nGrants),
				Bound: fmt.Sprintf("%d = max(%d, %d ppm × %d requests + %d)", allowed, m.Floor, m.PPM, nReqs, m.Reserve),
			}
		}
		return nil
	})
}

// CheckThrottle checks that no retry was granted at or below the threshold.
// Each grant took a token and left more than Max/2, so by every grant,
// 2 × (start − 1000 × grants + Ratio × successes) > Max, where start is Max,
// or, when the run read the balance between phases, that balance, phase by
// phase; every balance read must be within [0, Max].
func (r *Run) CheckThrottle(m model.Throttle) error {
	if err := r.checkBalances("throttle", m.Max); err != nil {
		return err
	}
	segs, bases := r.segments(func(int) int64 { return m.Max })
	for i, seg := range segs {
		var successes, granted int64
		err := sweep(seg, func(e Entry) {
			if e.Op.Op == model.Success {
				successes++
			}
		}, func(e Entry) error {
			granted++
			if left := bases[i] - 1000*granted + m.Ratio*successes; 2*left <= m.Max {
				return &Violation{
					Rule:  "throttle: no retry granted at or below max/2",
					At:    e,
					Got:   fmt.Sprintf("%d retries granted after %d successes from %s tokens", granted, successes, milli(bases[i])),
					Bound: fmt.Sprintf("%d, since each took a token and left more than %s of %s", (2*(bases[i]+m.Ratio*successes)-m.Max-1)/2000, milli(m.Max/2), milli(m.Max)),
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func milli(m int64) string {
	return fmt.Sprintf("%g", float64(m)/1000)
}

// HasInvariant reports whether Check knows an invariant for m.
func HasInvariant(m any) bool {
	switch m.(type) {
	case model.TokenBucket, model.Ratio, model.Throttle:
		return true
	}
	return false
}

// Check checks the run against the conservation invariant of m's family,
// for the three models of the model package. For any other model it
// returns false: there is no invariant to check.
func (r *Run) Check(m any) (checked bool, err error) {
	switch m := m.(type) {
	case model.TokenBucket:
		return true, r.CheckTokenBucket(m)
	case model.Ratio:
		return true, r.CheckRatio(m)
	case model.Throttle:
		return true, r.CheckThrottle(m)
	}
	return false, nil
}

package thirdparty

import (
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/retrybudget/retrybudget/model"
)

// TestXTimeRateRounding drives x/time/rate's Limiter one call at a time,
// with AllowN at explicit instants (Allow is AllowN(time.Now(), 1)), beside
// two models: XTimeFloatModel, x/time's own float64 arithmetic, which must
// agree on every answer, and XTimeRateModel, the exact token bucket the
// suite's subject uses. Every answer where x/time and the exact model part
// must be at a rounding edge: x/time grants a retry that the exact bucket
// grants at most a nanosecond later (its deficit is worth less than a
// nanosecond of refill, where durationFromTokens truncates the wait to
// zero), or denies one by less than float64's error. That is the evidence
// that the subject's Sequential, Invariant and Linearizable failures under
// XTimeRateModel are x/time's rounding and nothing else.
func TestXTimeRateRounding(t *testing.T) {
	exact, float := XTimeRateModel, XTimeFloatModel{Limit: 10, Burst: 10}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const seqs, ops = 2000, 400
	var parted, early, late int
	var worstEarly, worstLate float64 // in nanoseconds of refill
	for seed := range uint64(seqs) {
		rng := rand.New(rand.NewPCG(seed, 0x7a7e))
		lim := rate.NewLimiter(10, 10)
		se, sf := exact.Init(), float.Init()
		var now time.Duration
		for i := range ops {
			var op model.Op
			switch r := rng.IntN(10); {
			case r < 6:
				op = model.OpRetry(model.Transient)
			case r < 7:
				op = model.OpSuccess(model.Transient)
			default:
				op = model.OpAdvance(drawStep(rng, 100*time.Millisecond))
			}
			if op.Op == model.Advance {
				now += op.D
				se, _ = exact.Step(se, op)
				sf, _ = float.Step(sf, op)
				continue
			}
			if op.Op != model.Retry {
				se, _ = exact.Step(se, op) // refills; x/time is not told of a success
				continue
			}
			before := se
			got := lim.AllowN(base.Add(now), 1)
			var wantF, wantE bool
			sf, wantF = float.Step(sf, op)
			se, wantE = exact.Step(se, op)
			if got != wantF {
				t.Fatalf("seed %d, op %d at %v: x/time answered %v, its own arithmetic (XTimeFloatModel) %v; state %s",
					seed, i, now, got, wantF, float.DescribeState(sf))
			}
			if got == wantE {
				continue
			}
			parted++
			// The exact balance before the retry, in milli-tokens, after
			// its refill: what the retry asked of it.
			refilled, _ := exact.Step(before, model.OpSuccess(model.FirstAttempt)) // refill only: no bonus
			bal := float64(refilled.Tokens) + float64(refilled.Frac)/1e9
			ns := (1000 - bal) / 1e-5 // milli-tokens to nanoseconds of refill at 10,000 milli-tokens a second
			if got {
				early++
				worstEarly = max(worstEarly, ns)
				if ns > 1 {
					t.Errorf("seed %d, op %d at %v: x/time granted a retry the exact bucket grants %.3g ns later, more than a nanosecond", seed, i, now, ns)
				}
			} else {
				late++
				worstLate = max(worstLate, -ns)
				if -ns > 1e-3 {
					t.Errorf("seed %d, op %d at %v: x/time denied a retry the exact bucket grants with %.3g ns of refill to spare", seed, i, now, -ns)
				}
			}
			break // the two buckets hold different balances from here on
		}
	}
	t.Logf("%d of %d sequences parted from the exact bucket: %d granted early (by at most %.3g ns of refill), %d denied (by at most %.3g ns)",
		parted, seqs, early, worstEarly, late, worstLate)
	if parted == 0 {
		t.Error("x/time never parted from the exact bucket: the rounding this test pins is gone")
	}
}

// drawStep draws a forward clock step around scale: edges a nanosecond
// either side of whole multiples, tiny steps, and anything up to a few
// scales, as the suite's steps do.
func drawStep(rng *rand.Rand, scale time.Duration) time.Duration {
	switch rng.IntN(5) {
	case 0:
		return time.Duration(1 + rng.IntN(5))
	case 1:
		return scale*time.Duration(1+rng.IntN(3)) + time.Duration(rng.IntN(3)-1)
	case 2:
		return time.Duration(rng.Int64N(int64(scale)))
	case 3:
		return time.Duration(rng.Int64N(int64(3 * scale)))
	default:
		return scale - time.Duration(1+rng.IntN(20))
	}
}

// TestXTimeRateSuiteCounterexample replays the suite's shrunk Sequential
// counterexample with explicit instants: eight retries at 0, four steps of
// 3 ns, two retries (the rest of that history's retries are denied and
// change nothing), then 99.999987 ms. The exact bucket then holds
// 0.99999999 tokens, and x/time grants: 1 − 0.99999999 tokens take 1 ns to
// refill at 10 a second, and (−tokens/limit)·1e9 comes out just below 1.0
// in float64, which time.Duration truncates to 0 (durationFromTokens,
// rate.go:405–418), so reserveN's wait is 0 and the retry is ok
// (rate.go:356–362).
func TestXTimeRateSuiteCounterexample(t *testing.T) {
	lim := rate.NewLimiter(10, 10)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 8 {
		lim.AllowN(base, 1)
	}
	at := base.Add(12 * time.Nanosecond)
	for range 2 {
		if !lim.AllowN(at, 1) {
			t.Fatal("a retry with two tokens left was denied")
		}
	}
	if lim.AllowN(at, 1) {
		t.Fatal("a retry with 1.2e-7 tokens left was granted")
	}
	at = at.Add(99_999_987 * time.Nanosecond)
	tokens := lim.TokensAt(at)
	if !lim.AllowN(at, 1) {
		t.Fatalf("at %v with %.17g tokens: x/time denied; the rounding is gone", at.Sub(base), tokens)
	}
	s := XTimeRateModel.Init()
	for _, op := range []model.Op{
		model.OpRetry(model.Transient), model.OpRetry(model.Transient), model.OpRetry(model.Transient), model.OpRetry(model.Transient),
		model.OpRetry(model.Transient), model.OpRetry(model.Transient), model.OpRetry(model.Transient), model.OpRetry(model.Transient),
		model.OpAdvance(12), model.OpRetry(model.Transient), model.OpRetry(model.Transient), model.OpRetry(model.Transient),
		model.OpAdvance(99_999_987),
	} {
		s, _ = XTimeRateModel.Step(s, op)
	}
	if _, ok := XTimeRateModel.Step(s, model.OpRetry(model.Transient)); ok {
		t.Fatal("the exact bucket grants too")
	}
	t.Logf("at %v x/time held %.17g tokens (exactly 0.99999999 in the model: %s) and granted", at.Sub(base), tokens, XTimeRateModel.DescribeState(s))
}

// TestXTimeRateStaleNow is x/time's concurrency bug, deterministically.
// Allow() is AllowN(time.Now(), 1) (rate.go:109–111): it reads the clock
// before reserveN takes lim.mu (rate.go:337–339), so a call can read t0,
// be delayed, and take the lock after another call has stored a later
// last. AllowN with explicit instants makes that interleaving one call
// after another: the delayed call is AllowN(t0, 1) made after
// AllowN(t1, 1).
//
// advance (rate.go:387–401) treats t0 before last as last (no refill, no
// loss), so the delayed call is granted from what is there; but reserveN
// then stores lim.last = t0 (rate.go:375), moving last back by t1 − t0, and
// the next call at t1 refills that interval a second time. Here the bucket
// is drained at t0 and t1 is a second later: between t0 and t1 the
// Limiter may grant 10 (one second at 10 a second), and every order of
// these calls grants at most 10, but it grants 12.
func TestXTimeRateStaleNow(t *testing.T) {
	lim := rate.NewLimiter(10, 10)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 10 {
		lim.AllowN(t0, 1) // drain at t0
	}
	t1 := t0.Add(time.Second)
	granted := 0
	if lim.AllowN(t1, 1) { // a call that read t1: refills 10, takes 1
		granted++
	}
	if lim.AllowN(t0, 1) { // the delayed call that read t0 before locking
		granted++
	}
	for range 20 { // calls at t1: last is t0 again, so the second refills again
		if lim.AllowN(t1, 1) {
			granted++
		}
	}
	if granted != 12 {
		t.Fatalf("granted %d between t0 and t1, want the 12 that the double refill gives (10 is the most any order allows)", granted)
	}
}

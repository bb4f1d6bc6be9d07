package classes

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// The class-1 evidence: each float budget agrees with its model on every
// prefix, up to 50 operations, of random mixes; the shortest sequence that
// parts it from its model is measured (by an exhaustive search for the
// throttle and the bucket, by counting for the ratio and the in-flight
// budget) and replayed.

// A divergence is where a budget first parts from its model on a sequence:
// the 1-based index of the operation after which an answer or the balance
// differs, or 0 when none does.
type divergence struct {
	at   int
	what string
}

// firstDivergence runs ops on a fresh budget and on its model, one at a
// time, comparing every answer and, after every operation, the balance
// (to half a thousandth of a token).
func firstDivergence[S any](t *testing.T, m model.Model[S], build func(budget.Clock) budget.Budget, ops []model.Op) divergence {
	t.Helper()
	clock := new(budget.ManualClock)
	b := build(clock)
	s := m.Init()
	mb, _ := m.(model.Balanced[S])
	for i, op := range ops {
		got := applyOp(t, b, clock, op)
		var want bool
		s, want = m.Step(s, op)
		if op.Op == model.Retry && got != want {
			return divergence{i + 1, fmt.Sprintf("%v: the budget answered %v, the model %v", op, got, want)}
		}
		if mb != nil {
			have, bal := b.(budget.Balancer).Available()*milli, mb.Balance(s)
			if math.Abs(have-float64(bal)) > 0.5 {
				return divergence{i + 1, fmt.Sprintf("after %v: the budget's balance is %.6f, the model's %.3f", op, have/milli, float64(bal)/milli)}
			}
		}
	}
	return divergence{}
}

// agreeOnRandomMixes draws runs random sequences of n operations from
// alphabet and fails if the budget parts from its model on any prefix.
func agreeOnRandomMixes[S any](t *testing.T, m model.Model[S], build func(budget.Clock) budget.Budget, alphabet []model.Op, n, runs int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range runs {
		ops := make([]model.Op, n)
		for i := range ops {
			ops[i] = alphabet[rng.IntN(len(alphabet))]
		}
		if d := firstDivergence(t, m, build, ops); d.at != 0 {
			t.Fatalf("random mix %d parts from the model at operation %d of %d: %s\n%s", run, d.at, n, d.what, compress(ops[:d.at]))
		}
	}
	t.Logf("%d random mixes of %d operations: every prefix agrees with the model", runs, n)
}

// compress writes ops with runs of one operation counted: "9×retry(transient), success(first)".
func compress(ops []model.Op) string {
	var parts []string
	for i := 0; i < len(ops); {
		j := i
		for j < len(ops) && ops[j] == ops[i] {
			j++
		}
		if j-i == 1 {
			parts = append(parts, ops[i].String())
		} else {
			parts = append(parts, fmt.Sprintf("%d×%v", j-i, ops[i]))
		}
		i = j
	}
	return strings.Join(parts, ", ")
}

// A floatState pairs a model state with the float64 a float budget holds.
type floatState[S comparable] struct {
	s S
	f float64
}

// shortestDivergence searches, breadth first and exhaustively, the pairs
// of model states and float states reachable by the operations of
// alphabet, and returns the shortest sequence after which an answer
// differs, and the number of pairs searched. step runs one operation on a
// budget holding f and returns what it then holds and its answer.
func shortestDivergence[S comparable](t *testing.T, m model.Model[S], alphabet []model.Op, start float64, step func(f float64, op model.Op) (float64, bool), maxDepth int) ([]model.Op, int) {
	t.Helper()
	type edge struct {
		from floatState[S]
		op   model.Op
	}
	first := floatState[S]{m.Init(), start}
	prev := map[floatState[S]]edge{}
	depth := map[floatState[S]]int{first: 0}
	queue := []floatState[S]{first}
	path := func(to floatState[S], last model.Op) []model.Op {
		ops := []model.Op{last}
		for to != first {
			e := prev[to]
			ops = append(ops, e.op)
			to = e.from
		}
		for i, j := 0, len(ops)-1; i < j; i, j = i+1, j-1 {
			ops[i], ops[j] = ops[j], ops[i]
		}
		return ops
	}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if depth[cur] >= maxDepth {
			break
		}
		for _, op := range alphabet {
			f, got := step(cur.f, op)
			s, want := m.Step(cur.s, op)
			if op.Op == model.Retry && got != want {
				return path(cur, op), len(depth)
			}
			next := floatState[S]{s, f}
			if _, ok := depth[next]; !ok {
				depth[next] = depth[cur] + 1
				prev[next] = edge{cur, op}
				queue = append(queue, next)
			}
		}
	}
	return nil, len(depth)
}

var (
	throttleAlphabet = []model.Op{request, retryT, retryTh, retry1st, succ1st, succT, succTh}
	bucketAlphabet   = throttleAlphabet
	ratioAlphabet    = []model.Op{request, request, request, request, retryT, retryTh, retry1st, succ1st,
		advance(1), advance(999 * time.Millisecond), advance(time.Second), advance(3300 * time.Millisecond), advance(10 * time.Second), advance(-time.Second)}
	inFlightAlphabet = []model.Op{request, request, request, retryT, retryT, retryTh, retry1st, succ1st, endT, end1st, callEnd}
)

func testGRPCFloatThrottle(t *testing.T) {
	build := func(budget.Clock) budget.Budget { return NewGRPCFloatThrottle(throttleModel) }
	agreeOnRandomMixes(t, throttleModel, build, throttleAlphabet, 50, 2000)
	step := func(f float64, op model.Op) (float64, bool) {
		b := NewGRPCFloatThrottle(throttleModel)
		b.tokens = f
		got := applyOp(t, b, nil, op)
		return b.tokens, got
	}
	seq, pairs := shortestDivergence(t, throttleModel, throttleAlphabet, 10, step, 300)
	if seq == nil {
		t.Fatalf("no divergence within 300 operations (%d pairs searched)", pairs)
	}
	t.Logf("shortest sequence that parts it from the model: %d operations (%d pairs of states searched): %s", len(seq), pairs, compress(seq))
	if len(seq) != 126 {
		t.Errorf("the doc comment says 126 operations; the search found %d", len(seq))
	}
	d := firstDivergence(t, throttleModel, build, seq)
	if d.at != len(seq) {
		t.Fatalf("replayed, the sequence parts at operation %d (%s), want %d", d.at, d.what, len(seq))
	}
	t.Logf("replayed on a fresh budget: operation %d: %s", d.at, d.what)
}

func testDimeBonusBucket(t *testing.T) {
	build := func(budget.Clock) budget.Budget { return NewDimeBonusBucket(dimeModel) }
	agreeOnRandomMixes(t, dimeModel, build, bucketAlphabet, 50, 2000)
	step := func(f float64, op model.Op) (float64, bool) {
		b := NewDimeBonusBucket(dimeModel)
		b.tokens = f
		got := applyOp(t, b, nil, op)
		return b.tokens, got
	}
	seq, pairs := shortestDivergence(t, dimeModel, bucketAlphabet, 1000, step, 300)
	if seq == nil {
		t.Fatalf("no divergence within 300 operations (%d pairs searched)", pairs)
	}
	t.Logf("shortest sequence that parts it from the model: %d operations (%d pairs of states searched): %s", len(seq), pairs, compress(seq))
	if len(seq) != 86 {
		t.Errorf("the doc comment says 86 operations; the search found %d", len(seq))
	}
	d := firstDivergence(t, dimeModel, build, seq)
	if d.at != len(seq) {
		t.Fatalf("replayed, the sequence parts at operation %d (%s), want %d", d.at, d.what, len(seq))
	}
	t.Logf("replayed on a fresh budget: operation %d: %s", d.at, d.what)
}

// countsThatDiffer returns the counts n in [1, upTo] at which limit(n) and
// the exact ⌊ppm × n / 1e6⌋ differ.
func countsThatDiffer(upTo int64, ppmOf int64, limit func(n int64) float64) []int64 {
	var out []int64
	for n := int64(1); n <= upTo; n++ {
		if limit(n) != float64(ppmOf*n/ppm) {
			out = append(out, n)
		}
	}
	return out
}

func testFloatRatio(t *testing.T) {
	build := func(c budget.Clock) budget.Budget { return NewFloatRatio(ratio29Model, c) }
	agreeOnRandomMixes(t, ratio29Model, build, ratioAlphabet, 50, 2000)
	r := NewFloatRatio(ratio29Model, new(budget.ManualClock))
	differ := countsThatDiffer(100_000, ratio29Model.PPM, func(n int64) float64 { return math.Floor(r.share * float64(n)) })
	if len(differ) == 0 || differ[0] != 100 {
		t.Fatalf("want the first count whose truncated float64 product differs to be 100, got %v", differ[:min(len(differ), 10)])
	}
	t.Logf("⌊0.29 × n⌋ in float64 differs from the exact one at %d counts n ≤ 100000, the first %v", len(differ), differ[:10])
	seq := concat(repeat(100, request), repeat(29, retryT))
	d := firstDivergence(t, ratio29Model, build, seq)
	if d.at != 100 {
		t.Fatalf("want the balance to part at operation 100, got %d (%s)", d.at, d.what)
	}
	t.Logf("first divergence, of the balance: operation %d: %s", d.at, d.what)
	// The answers: replay without comparing balances.
	clock := new(budget.ManualClock)
	b := build(clock)
	s := ratio29Model.Init()
	for i, op := range seq {
		got := applyOp(t, b, clock, op)
		var want bool
		s, want = ratio29Model.Step(s, op)
		if got != want {
			if i+1 != 129 {
				t.Fatalf("want the first answer to part at operation 129, got %d", i+1)
			}
			t.Logf("first divergence of an answer: operation %d, %v: the budget %v, the model %v", i+1, op, got, want)
			return
		}
	}
	t.Fatal("no answer parted")
}

func testFloatPercentInFlight(t *testing.T) {
	build := func(budget.Clock) budget.Budget { return NewFloatPercentInFlight(envoy35Model) }
	agreeOnRandomMixes(t, envoy35Model, build, inFlightAlphabet, 50, 2000)
	b0 := NewFloatPercentInFlight(envoy35Model)
	differ := countsThatDiffer(100_000, envoy35Model.PPM, func(n int64) float64 { return math.Floor(b0.fraction * float64(n)) })
	if len(differ) == 0 || differ[0] != 180 {
		t.Fatalf("want the first count whose truncated float64 product differs to be 180, got %v", differ[:min(len(differ), 10)])
	}
	t.Logf("⌊(35.0/100) × n⌋ in float64 differs from the exact one at %d counts n ≤ 100000, the first %v", len(differ), differ[:10])
	seq := concat(repeat(180, request), repeat(63, retryT))
	d := firstDivergence(t, envoy35Model, build, seq)
	if d.at != 180 {
		t.Fatalf("want the balance to part at operation 180, got %d (%s)", d.at, d.what)
	}
	t.Logf("first divergence, of the balance: operation %d: %s", d.at, d.what)
	clock := new(budget.ManualClock)
	b := build(clock)
	s := envoy35Model.Init()
	for i, op := range seq {
		got := applyOp(t, b, clock, op)
		var want bool
		s, want = envoy35Model.Step(s, op)
		if got != want {
			if i+1 != 243 {
				t.Fatalf("want the first answer to part at operation 243, got %d", i+1)
			}
			t.Logf("first divergence of an answer: operation %d, %v: the budget %v, the model %v", i+1, op, got, want)
			return
		}
	}
	t.Fatal("no answer parted")
}

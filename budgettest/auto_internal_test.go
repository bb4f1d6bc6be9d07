package budgettest

import (
	"encoding/json"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// A child gives back, for a call it does not run, the error the parent's
// call gave: the same text, and a Failure errors.As still finds.
func TestPartsRoundTrip(t *testing.T) {
	f1 := &Failure{Rule: "r1", Where: "w1", Detail: "d1"}
	f2 := &Failure{Rule: "r2", Where: "w2", Detail: "d2"}
	for _, parts := range [][]part{
		nil,
		{{Failure: f1}},
		{{Check: "Linearizable", Failure: f1}},
		{{Check: "Linearizable", Failure: f1}, {Check: "Invariant", Failure: f2}, {Check: "Model", Text: "budgettest: something else"}},
	} {
		want := parts2err(parts)
		c := call{t: t, id: "x#" + string(rune('0'+len(parts)))}
		c.record(parts)
		got := parts2err(decode(t, c.prior()[c.id]))
		switch {
		case want == nil && got == nil:
			continue
		case want == nil || got == nil || got.Error() != want.Error():
			t.Errorf("%d parts: rebuilt %v, want %v", len(parts), got, want)
			continue
		}
		var f *Failure
		if len(parts) > 0 && parts[0].Failure != nil && (!errors.As(got, &f) || f.Detail != parts[0].Failure.Detail) {
			t.Errorf("%d parts: errors.As finds %v, want the first Failure", len(parts), f)
		}
	}
}

func decode(t *testing.T, data []byte) []part {
	t.Helper()
	var parts []part
	if len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, &parts); err != nil {
		t.Fatal(err)
	}
	return parts
}

type wrapsBucket struct {
	inner budget.Budget
}

func (w *wrapsBucket) Request()                 { w.inner.Request() }
func (w *wrapsBucket) Retry(k budget.Kind) bool { return w.inner.Retry(k) }
func (w *wrapsBucket) Success(k budget.Kind)    { w.inner.Success(k) }

// The packages to rewrite are found from the budget: its type's, and
// those of the values it holds, standard library left out.
func TestTypePackages(t *testing.T) {
	tb, err := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 500, TransientCost: 14, ThrottledCost: 5})
	if err != nil {
		t.Fatal(err)
	}
	got := typePackages(&wrapsBucket{inner: tb})
	want := []string{"github.com/retrybudget/retrybudget/budgettest", "github.com/retrybudget/retrybudget/budget"}
	if !slices.Equal(got, want) {
		t.Errorf("typePackages = %q, want %q", got, want)
	}
	if got := typePackages(nil); len(got) != 0 {
		t.Errorf("typePackages(nil) = %q, want none", got)
	}
}

// An uncontrolled verdict says so in one line; under
// -budgettest.control=require it is a failure of its own rule.
func TestUncontrolledVerdict(t *testing.T) {
	f := flag.Lookup("budgettest.control")
	old := f.Value.String()
	defer f.Value.Set(old)

	f.Value.Set("auto")
	if err := uncontrolled(t, CheckLinearizable, "no go command on PATH"); err != nil {
		t.Errorf("uncontrolled under auto = %v, want nil (a line in the log)", err)
	}
	f.Value.Set("require")
	err := uncontrolled(t, CheckLinearizable, "no go command on PATH")
	var fl *Failure
	if !errors.As(err, &fl) || fl.Rule != string(ruleControl) || !strings.Contains(fl.Detail, "uncontrolled verdict") || !strings.Contains(fl.Detail, "no go command on PATH") {
		t.Errorf("uncontrolled under require = %v, want a Failure of the control rule naming why", err)
	}
}

// A controlled stage whose heap passes its bound ends with a failure that
// names the bound, not with the machine's memory exhausted.
func TestHeapBoundIsANamedFailure(t *testing.T) {
	sub := Subject[struct{}]{Name: "hungry"}
	got := make(chan *Failure, 1)
	stop := make(chan struct{})
	defer close(stop)
	keep := make([]byte, 4<<20) // live heap above the bound below
	go sub.watchHeap(call{child: "Linearizable"}, 1<<20, stop, func(f *Failure) { got <- f })
	select {
	case f := <-got:
		if f.Rule != string(ruleControl) || !strings.Contains(f.Detail, "went past its memory bound") || !strings.Contains(f.Detail, "above 1 MiB") {
			t.Errorf("the failure = %v, want the control rule naming the bound", f)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no failure 10s after the heap passed its bound")
	}
	_ = keep[len(keep)-1]
}

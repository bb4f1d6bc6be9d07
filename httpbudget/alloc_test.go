package httpbudget_test

import (
	"net/http"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/httpbudget"
)

// A request that succeeds at once costs the Transport no allocation: the
// first attempt is the caller's request itself, and the Retrier allocates
// nothing on its success path. Base here answers with one response, made
// once, so that only the Transport's own allocations count.
func TestRoundTripAllocs(t *testing.T) {
	tb, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp := respond(req, http.StatusOK, nil, "")
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	for _, tt := range []struct {
		name string
		tr   *httpbudget.Transport
		want float64
	}{
		{"Retrier", &httpbudget.Transport{Base: base, Retrier: &budget.Retrier{Budget: tb}}, 0},
		{"BudgetFor", &httpbudget.Transport{Base: base, Retrier: &budget.Retrier{},
			BudgetFor: func(*http.Request) (budget.Budget, error) { return tb, nil }}, 0},
		// The call's Classifier wraps the Retrier's own: one closure.
		{"Classify", &httpbudget.Transport{Base: base, Retrier: &budget.Retrier{Budget: tb, Classify: budget.DefaultClassifier}}, 1},
		{"ClassifyResponse", &httpbudget.Transport{Base: base, Retrier: &budget.Retrier{Budget: tb}, ClassifyResponse: retry500}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := testing.AllocsPerRun(1000, func() {
				if _, err := tt.tr.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
			})
			if n > tt.want {
				t.Errorf("a successful RoundTrip allocates %v times; want at most %v", n, tt.want)
			}
		})
	}
}

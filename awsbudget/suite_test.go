package awsbudget_test

import (
	"context"
	"testing"

	"github.com/retrybudget/retrybudget/awsbudget"
	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/model"
)

// sdkView is a budget as the SDK's standard retryer sees it through the
// adapter: a retry is GetToken at the SDK's cost for the kind, its success
// the release function GetToken returned, a first attempt's success
// AddTokens(1). The suite then checks what the SDK is served.
type sdkView struct {
	rl *awsbudget.RateLimiter
	b  budget.Budget
	// release holds, by kind, the release function of one granted retry,
	// to call on every success of that kind: the adapter's releases of one
	// kind are alike, so one stands for the retry that succeeded. It is
	// set once, before the checks begin.
	release [3]func() error
}

// newSDKView returns the view of b through the adapter. It takes one
// release function of each kind by a grant that it then releases, which
// leaves b as it was (full) when the refund makes up the cost.
func newSDKView(b budget.Budget) *sdkView { return viewOf(awsbudget.New(b), b) }

func viewOf(rl *awsbudget.RateLimiter, b budget.Budget) *sdkView {
	v := &sdkView{rl: rl, b: b}
	for k, cost := range map[budget.Kind]uint{budget.Transient: 14, budget.Throttled: 5} {
		release, err := v.rl.GetToken(context.Background(), cost)
		if err != nil {
			panic(err)
		}
		v.release[k] = release
	}
	for _, k := range []budget.Kind{budget.Transient, budget.Throttled} {
		if err := v.release[k](); err != nil {
			panic(err)
		}
	}
	return v
}

func (v *sdkView) Request() { v.b.Request() } // what CountRequests does

func (v *sdkView) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false // the SDK never asks for anything else
	}
	cost := uint(14)
	if k == budget.Throttled {
		cost = 5
	}
	_, err := v.rl.GetToken(context.Background(), cost)
	return err == nil
}

func (v *sdkView) Success(k budget.Kind) {
	if k.IsRetry() {
		_ = v.release[k]()
		return
	}
	_ = v.rl.AddTokens(1)
}

func (v *sdkView) Available() float64 { return v.b.(budget.Balancer).Available() }

// budget.TokenBucket with the SDK's numbers, behind the adapter, as the
// SDK calls it, is the SDK's quota: model.AWS.
func TestAdapterConforms(t *testing.T) {
	budgettest.Run(t, budgettest.Subject[model.TokenBucketState]{
		Name:  "awsbudget.RateLimiter(budget.TokenBucket)",
		Model: model.AWS(),
		New:   func(*testing.T, budget.Clock) budget.Budget { tb := awsBucket(); return newSDKView(tb) },
	})
}

func awsBucket() *budget.TokenBucket {
	tb, err := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 500, TransientCost: 14, ThrottledCost: 5, SuccessBonus: 1})
	if err != nil {
		panic(err)
	}
	return tb
}

// The same suite fails an adapter that maps the SDK's costs the wrong way
// round (here by a ThrottlingRetryCost of 14, as a user who set it to the
// transient cost would): the checks see what the SDK is served.
func TestSuiteCatchesSwappedCosts(t *testing.T) {
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{
		Name:  "swapped",
		Model: model.AWS(),
		New: func(*testing.T, budget.Clock) budget.Budget {
			tb := awsBucket()
			return viewOf(&awsbudget.RateLimiter{Budget: tb, ThrottlingRetryCost: 14}, tb)
		},
	}, budgettest.CheckSequential)
	if err == nil {
		t.Fatal("the Sequential check passed an adapter that charges a throttled retry 14 tokens and a transient one 5")
	}
	t.Logf("caught: %.200s", err)
}

package fleet_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/redis/go-redis/v9"

	"github.com/retrybudget/retrybudget/awsbudget"
	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/redisserver"
	"github.com/retrybudget/retrybudget/redisbudget"
)

// outage counts what one fleet's SDK clients did during an outage in which
// every attempt fails, with a throttling error or a timeout in turn.
type outage struct {
	transient, throttled atomic.Int64 // retries made, by kind
	unavailable          atomic.Int64 // calls that ended because the budget could not answer
}

var (
	errThrottled = &smithy.GenericAPIError{Code: "ThrottlingException"}
	errTimeout   = &smithy.GenericAPIError{Code: "RequestTimeoutException"}
)

// run has each of the limiters' clients (one SDK retryer per limiter, four
// goroutines each) make calls through the SDK's retry middleware until one
// of its calls is denied a retry.
func (o *outage) run(t *testing.T, limiters []retry.RateLimiter) {
	var wg sync.WaitGroup
	for p, rl := range limiters {
		r := retry.NewStandard(func(opt *retry.StandardOptions) {
			opt.RateLimiter = rl
			opt.MaxAttempts = 4
			opt.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
		var denied atomic.Bool
		for g := range 4 {
			wg.Go(func() {
				for i := 0; !denied.Load(); i++ {
					if i > 10000 {
						t.Errorf("process %d: 10000 calls and no denial", p)
						return
					}
					err := o.call(r, p+g+i)
					var quota ratelimit.QuotaExceededError // the SDK's own quota's denial, and awsbudget's
					switch {
					case errors.As(err, &quota):
						denied.Store(true)
					case errors.Is(err, budget.ErrBudgetUnavailable):
						o.unavailable.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
}

// call runs one call that fails on every attempt, through the SDK's retry
// middleware, and counts its retries by kind.
func (o *outage) call(r *retry.Standard, seed int) error {
	stack := middleware.NewStack("Op", smithyhttp.NewStackRequest)
	_ = stack.Finalize.Add(retry.NewAttemptMiddleware(r, smithyhttp.RequestCloner), middleware.After)
	var last error
	h := middleware.DecorateHandler(middleware.HandlerFunc(func(context.Context, any) (any, middleware.Metadata, error) {
		switch last {
		case errThrottled:
			o.throttled.Add(1)
		case errTimeout:
			o.transient.Add(1)
		}
		last = errTimeout
		if seed++; seed%3 == 0 {
			last = errThrottled
		}
		return nil, middleware.Metadata{}, last
	}), stack)
	_, _, err := h.Handle(context.Background(), struct{}{})
	return err
}

// Four processes' worth of SDK clients, each with its own connection and
// its own redisbudget.TokenBucket of the same name, spend one bucket of 500
// tokens at the SDK's costs, not four: the retries they make in an outage
// cost at most 500 tokens together, and exactly what the bucket lost. The
// SDK's default, a bucket per client, lets the same fleet spend four times
// as much.
func TestFleetOfSDKClientsSharesOneQuota(t *testing.T) {
	s := redisserver.Start(t)
	name := "fleet" // the server is the test's own
	sdk := budget.TokenBucketConfig{Capacity: 500, TransientCost: 14, ThrottledCost: 5, SuccessBonus: 1}
	var limiters []retry.RateLimiter
	var buckets []*redisbudget.TokenBucket
	for range 4 {
		tb, err := redisbudget.NewTokenBucket(redisbudget.Config{Client: client(t, s.Addr), Name: name, CallTimeout: 5 * time.Second}, sdk)
		if err != nil {
			t.Fatal(err)
		}
		buckets = append(buckets, tb)
		limiters = append(limiters, awsbudget.New(tb))
	}
	var shared outage
	shared.run(t, limiters)

	spent := 14*shared.transient.Load() + 5*shared.throttled.Load()
	left, err := buckets[0].AvailableContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var granted uint64
	for _, tb := range buckets {
		granted += tb.Stats().Granted
	}
	t.Logf("shared bucket: %d transient and %d throttled retries, %d tokens, %v left, %d calls the budget could not answer",
		shared.transient.Load(), shared.throttled.Load(), spent, left, shared.unavailable.Load())
	if spent > 500 {
		t.Errorf("the fleet's retries cost %d tokens, more than one bucket of 500 holds", spent)
	}
	if float64(spent)+left != 500 {
		t.Errorf("the retries cost %d tokens, but the bucket lost %v", spent, 500-left)
	}
	if got := shared.transient.Load() + shared.throttled.Load(); uint64(got) != granted {
		t.Errorf("%d retries were made, the budgets' Stats granted %d", got, granted)
	}
	if left >= 14 {
		t.Errorf("every process was denied a retry, yet %v tokens are left", left)
	}

	var separate outage
	var own []retry.RateLimiter
	for range 4 {
		own = append(own, ratelimit.NewTokenRateLimit(500))
	}
	separate.run(t, own)
	alone := 14*separate.transient.Load() + 5*separate.throttled.Load()
	t.Logf("a bucket per client: %d transient and %d throttled retries, %d tokens", separate.transient.Load(), separate.throttled.Load(), alone)
	if alone <= 3*500 {
		t.Errorf("with a bucket each, the four clients spent %d tokens; the comparison expects more than 1500", alone)
	}
}

// client returns a client with its own pool and no retries of its own.
func client(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 4,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond,
		ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

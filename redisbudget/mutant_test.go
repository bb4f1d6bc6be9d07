package redisbudget_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/redisbudget"
)

// clientSideBucket is the Redis budget people write first: GET the
// balance, compare, SET it back, from the client, with no script and no
// transaction. Between one client's GET and its SET another client's
// retry can land: the fleet overspends. It supports no refill.
func clientSideBucket(m model.TokenBucket, cfg redisbudget.Config) (netBudget, error) {
	key := "clientside:{" + cfg.Name + "}"
	c := cfg.Client
	get := func(ctx context.Context) (int64, error) {
		v, err := c.Get(ctx, key).Int64()
		if errors.Is(err, redis.Nil) {
			return m.Capacity, nil
		}
		return v, err
	}
	cost := func(k model.Kind) int64 {
		if k == model.Throttled {
			return m.ThrottledCost
		}
		return m.TransientCost
	}
	return func(ctx context.Context, op model.Op) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
		defer cancel()
		switch op.Op {
		case model.Retry:
			if !op.Kind.IsRetry() {
				return false, nil
			}
			v, err := get(ctx)
			if err != nil || v < cost(op.Kind) {
				return false, err
			}
			return true, c.Set(ctx, key, v-cost(op.Kind), 0).Err() // BUG: not atomic with the GET
		case model.Success:
			credit := m.SuccessBonus
			if op.Kind.IsRetry() {
				credit = cost(op.Kind)
			}
			v, err := get(ctx)
			if err != nil {
				return false, err
			}
			return false, c.Set(ctx, key, min(v+credit, m.Capacity), 0).Err()
		}
		return false, nil
	}, nil
}

// The same check over the network catches a budget that is not atomic in
// the server.
func TestLinearizabilityCatchesClientSideReadModifyWrite(t *testing.T) {
	s := startServer(t)
	m := model.TokenBucket{Capacity: 20_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	for seed := range uint64(50) {
		sc := scenario(seed+1, 9, seqcheck.Timing{})
		h := recordNet(t, s, sc, "none", func(c redisbudget.Config) (netBudget, error) { return clientSideBucket(m, c) })
		r := linearizability.Check(m, h, 60*time.Second)
		if r.Verdict == linearizability.Violation {
			t.Logf("caught in scenario %d:\n%s", seed+1, r.Explain())
			return
		}
	}
	t.Fatal("50 scenarios of a client-side read-modify-write showed no violation")
}

package redisbudget_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/race"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/redisbudget"
)

// The script follows model.Ratio with a Reserve, one call at a time, as
// TestRatioMatchesModel checks it without one.
func TestRatioWithReserveMatchesModel(t *testing.T) {
	race.Skip(t, "a sequential check: one goroutine calls the budget")
	s := startServer(t)
	client := s.client(t)
	rapid.Check(t, func(rt *rapid.T) {
		m := seqcheck.DrawRatio(rt)
		m.Reserve = rapid.Int64Range(0, 8).Draw(rt, "reserve")
		m.Slots = min(m.Slots, 64) // each expired slot is a call inside the script
		m.Window = max(m.Window, time.Duration(m.Slots))
		tm := seqcheck.RatioTiming(m)
		tm.Forward = true
		name := fresh("reserve")
		seqcheck.Check(rt, seqcheck.Subject[model.RatioState]{
			Model: m,
			New: func(c budget.Clock) budget.Budget {
				b, err := redisbudget.NewRatio(redisbudget.Config{Client: client, Name: name, Clock: c, CallTimeout: time.Second}, seqcheck.RatioConfig(m, nil))
				if err != nil {
					rt.Fatal(err)
				}
				return failOnError{b, rt}
			},
			Timing: tm,
		}, nil)
	})
}

// Floor and Reserve at their boundaries, on the server: max(Floor,
// ⌊Ratio × requests⌋ + Reserve), read by Available and by the answers.
func TestRatioReserveBoundaries(t *testing.T) {
	s := startServer(t)
	client := s.client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name            string
		floor, reserve  int
		requests, allow int
	}{
		{"ReserveOnly", 0, 2, 30, 5},              // 3 + 2
		{"ARequestShort", 0, 2, 29, 4},            // ⌊2.9⌋ + 2
		{"FloorAbove", 10, 2, 30, 10},             // max(10, 3 + 2)
		{"FloorBelow", 3, 2, 30, 5},               // max(3, 3 + 2)
		{"FloorWithNoTraffic", 3, 2, 0, 3},        // max(3, 0 + 2)
		{"LargeReserveNoTraffic", 0, 100, 0, 100}, // Finagle's: minRetriesPerSec 10 × ttl 10 s
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := redisbudget.NewRatio(redisbudget.Config{Client: client, Name: fresh("bounds"), Clock: new(budget.ManualClock), CallTimeout: time.Second},
				budget.RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Floor: tc.floor, Reserve: tc.reserve})
			if err != nil {
				t.Fatal(err)
			}
			for range tc.requests {
				if err := b.RequestContext(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := b.AvailableContext(ctx); err != nil || got != float64(tc.allow) {
				t.Errorf("AvailableContext() = %v, %v; want %d", got, err, tc.allow)
			}
			for i := range tc.allow {
				if ok, err := b.RetryContext(ctx, budget.Transient); !ok || err != nil {
					t.Fatalf("retry %d of %d: granted %v, %v; want granted", i+1, tc.allow, ok, err)
				}
			}
			if ok, err := b.RetryContext(ctx, budget.Transient); ok || err != nil {
				t.Errorf("retry %d: granted %v, %v; want denied", tc.allow+1, ok, err)
			}
		})
	}
}

// Two processes whose Reserve differs cannot share a key: the second fails
// with ErrConfigMismatch, naming both.
func TestRatioReserveMismatchIsAnError(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	cfg := redisbudget.Config{Client: s.client(t), Name: fresh("reserve-mismatch"), CallTimeout: time.Second}
	r1, err := redisbudget.NewRatio(cfg, budget.RatioConfig{Ratio: 0.2, Window: 10 * time.Second, Slots: 10, Reserve: 100})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := redisbudget.NewRatio(cfg, budget.RatioConfig{Ratio: 0.2, Window: 10 * time.Second, Slots: 10, Reserve: 50})
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.RequestContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r2.RequestContext(ctx); !errors.Is(err, redisbudget.ErrConfigMismatch) || !strings.Contains(err.Error(), "reserve=100 ") || !strings.Contains(err.Error(), "reserve=50 ") {
		t.Errorf("a reserve of 50 on a key made with 100: %v; want ErrConfigMismatch naming both", err)
	}
}

// With FleetSize, the fallback has a fleet member's share of the reserve,
// as of the floor: 1/FleetSize of each, rounded down.
func TestRatioFallbackSharesTheReserve(t *testing.T) {
	s := startServer(t)
	client := s.client(t)
	s.kill() // every call fails: the fallback decides
	for _, tc := range []struct {
		floor, reserve, want int
	}{
		{0, 100, 25},
		{0, 10, 2}, // rounded down
		{8, 4, 2},  // max(8/4, 4/4)
	} {
		cfg := redisbudget.Config{Client: client, Name: fresh("fallback-reserve"), CallTimeout: 50 * time.Millisecond, FleetSize: 4}
		b, err := redisbudget.NewRatio(cfg, budget.RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Floor: tc.floor, Reserve: tc.reserve})
		if err != nil {
			t.Fatal(err)
		}
		granted := 0
		for range tc.want + 10 {
			if b.Retry(budget.Transient) {
				granted++
			}
		}
		if granted != tc.want {
			t.Errorf("Floor %d, Reserve %d, FleetSize 4: the fallback granted %d retries; want %d", tc.floor, tc.reserve, granted, tc.want)
		}
	}
}

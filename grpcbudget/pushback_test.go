package grpcbudget_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/grpcbudget"
)

// setTrailer fills in the trailer of a grpc.Trailer option among opts, as
// grpc does when an attempt ends.
func setTrailer(opts []grpc.CallOption, md metadata.MD) {
	for _, o := range opts {
		if t, ok := o.(grpc.TrailerCallOption); ok {
			*t.TrailerAddr = md
		}
	}
}

// Every reading of the pushback trailer, through a fake invoker that
// fails the first attempt with UNAVAILABLE and that trailer.
func TestPushbackValues(t *testing.T) {
	const maxDelay = 50 * time.Millisecond
	for _, tt := range []struct {
		name    string
		values  []string
		retried bool
		atLeast time.Duration
	}{
		{"None", nil, true, 0},
		{"Zero", []string{"0"}, true, 0},
		{"Ms", []string{"20"}, true, 20 * time.Millisecond},
		{"Plus", []string{"+20"}, true, 20 * time.Millisecond},
		{"CappedByMaxDelay", []string{"3600000"}, true, maxDelay},
		{"HugeCappedByMaxDelay", []string{"99999999999999999999"}, true, maxDelay},
		{"Negative", []string{"-1"}, false, 0},
		{"HugeNegative", []string{"-99999999999999999999"}, false, 0},
		{"Empty", []string{""}, false, 0},
		{"NotANumber", []string{"soon"}, false, 0},
		{"Fraction", []string{"1.5"}, false, 0},
		{"TwoValues", []string{"10", "10"}, false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := &recorder{}
			intercept := grpcbudget.UnaryClientInterceptor(&budget.Retrier{Budget: b, BaseDelay: time.Nanosecond, MaxDelay: maxDelay})
			var starts []time.Time
			invoker := func(_ context.Context, _ string, _, _ any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
				starts = append(starts, time.Now())
				if len(starts) > 1 {
					setTrailer(opts, nil)
					return nil
				}
				md := metadata.MD{}
				for _, v := range tt.values {
					md.Append(grpcbudget.PushbackKey, v)
				}
				setTrailer(opts, md)
				return status.Error(codes.Unavailable, "down")
			}
			start := time.Now()
			err := intercept(context.Background(), "/m", nil, nil, nil, invoker)
			if tt.retried {
				if err != nil || len(starts) != 2 {
					t.Fatalf("call = %v after %d attempts; want success after 2", err, len(starts))
				}
				if gap := starts[1].Sub(starts[0]); gap < tt.atLeast {
					t.Errorf("retry %v after the first attempt; want at least %v", gap, tt.atLeast)
				}
				if took := time.Since(start); took > 10*time.Second {
					t.Errorf("call took %v; want the wait capped at MaxDelay %v", took, maxDelay)
				}
				b.check(t, 1, []budget.Kind{budget.Transient}, []budget.Kind{budget.Transient})
				return
			}
			if status.Code(err) != codes.Unavailable || len(starts) != 1 {
				t.Errorf("call = %v after %d attempts; want UNAVAILABLE after 1", err, len(starts))
			}
			b.check(t, 1, nil, nil)
		})
	}
}

// An invoker error that is no status is not retried, and comes back as it
// is.
func TestUnaryPlainError(t *testing.T) {
	plain := errors.New("plain")
	n := 0
	err := grpcbudget.UnaryClientInterceptor(nil)(context.Background(), "/m", nil, nil, nil,
		func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { n++; return plain })
	if err != plain || n != 1 {
		t.Errorf("call = %v after %d attempts; want the invoker's error after 1", err, n)
	}
}

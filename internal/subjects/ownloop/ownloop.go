// Package ownloop holds retry loops of a team's own, written from the
// budget.Loop contract alone, that the adapters' tests (httpbudget's and
// grpcbudget's) put behind the adapters, and what such a loop reads from
// an attempt's error.
package ownloop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// ErrGaveUp is what Tries returns, wrapping the last attempt's error, when
// it runs out of attempts.
var ErrGaveUp = errors.New("test loop: gave up")

// A Read is what a loop read from a failed attempt's error, as a team's
// loop would: the verdict of budget.DefaultClassifier, and the server's
// delay, if the error has one.
type Read struct {
	Kind     budget.Kind
	Retry    bool
	Delay    time.Duration
	HasDelay bool
}

func (r Read) String() string {
	s := fmt.Sprintf("(%v, %v)", r.Kind, r.Retry)
	if r.HasDelay {
		s += fmt.Sprintf(" after %v", r.Delay)
	}
	return s
}

// ReadErr reads err as a team's loop would.
func ReadErr(err error) Read {
	kind, retry := budget.DefaultClassifier(err)
	r := Read{Kind: kind, Retry: retry}
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		r.Delay, r.HasDelay = ra.RetryAfter(), true
	}
	return r
}

// Tries is a retry loop of a team's own: up to Max attempts, no budget, a
// wait of Wait between attempts, racing ctx. Each attempt runs on a
// context of its own that ends as the attempt returns, as a loop with a
// per-attempt timeout does, and is told only its number (a zero Key). It
// retries what budget.DefaultClassifier says to (every failure when Deaf
// is set), and records what it read.
type Tries struct {
	Max  int
	Wait time.Duration
	Deaf bool

	mu    sync.Mutex
	reads []Read
}

var _ budget.Loop = (*Tries)(nil)

// Do runs op as Tries describes.
func (l *Tries) Do(ctx context.Context, op func(context.Context, budget.Attempt) error) error {
	var err error
	for n := 1; ; n++ {
		if cerr := ctx.Err(); cerr != nil {
			return errors.Join(cerr, err)
		}
		actx, cancel := context.WithCancel(ctx)
		err = op(actx, budget.Attempt{N: n})
		cancel()
		if err == nil {
			return nil
		}
		r := ReadErr(err)
		l.mu.Lock()
		l.reads = append(l.reads, r)
		l.mu.Unlock()
		if !r.Retry && !l.Deaf {
			return err
		}
		if n >= l.Max {
			return fmt.Errorf("%w after %d attempts: %w", ErrGaveUp, n, err)
		}
		timer := time.NewTimer(l.Wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return errors.Join(ctx.Err(), err)
		case <-timer.C:
		}
	}
}

// Reads returns what l read from the failures, in order.
func (l *Tries) Reads() []Read {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reads)
}

// Func is a budget.Loop made of a function.
type Func func(ctx context.Context, op func(context.Context, budget.Attempt) error) error

// Do calls f.
func (f Func) Do(ctx context.Context, op func(context.Context, budget.Attempt) error) error {
	return f(ctx, op)
}

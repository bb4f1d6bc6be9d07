package budget

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Errors a Retrier returns when it gives up. Each wraps the last error the
// operation returned; test for them with [errors.Is].
var (
	// ErrDenied means the budget denied a retry.
	ErrDenied = errors.New("budget: retry denied")
	// ErrAttempts means the call used MaxAttempts attempts.
	ErrAttempts = errors.New("budget: out of attempts")
	// ErrNoTime means the next wait would end at or after the context's
	// deadline or the call's MaxElapsed, so the Retrier gave up at once
	// instead of waiting for a retry that could not run.
	ErrNoTime = errors.New("budget: no time left for another attempt")
	// ErrBudgetUnavailable means a ContextBudget could not answer whether
	// a retry may follow and did not grant one: the budget failed, it did
	// not say no. The budget's own error is in the chain too, after the
	// operation's.
	ErrBudgetUnavailable = errors.New("budget: the budget could not answer")
)

// Defaults of a Retrier's zero fields.
const (
	DefaultMaxAttempts = 3
	DefaultBaseDelay   = 100 * time.Millisecond
	DefaultMaxDelay    = 20 * time.Second
)

// A Classifier says whether an error may be retried and, if so, of which
// kind the retry is (Transient or Throttled).
//
// A retry kind returned with retryable false says that the failure is of
// that kind but must not be retried, because the server forbade it (gRPC's
// "do not retry" pushback): the Retrier does not retry it, and tells a
// [FailureCounter] of the failure. Any other kind with retryable false,
// FirstAttempt say, is a failure that is not retryable at all.
type Classifier func(err error) (kind Kind, retryable bool)

// A Retrier runs an operation and retries it under a Budget: a budget-aware
// retry loop. Its zero value retries up to 3 attempts with full-jitter
// exponential backoff from 100ms to 20s, no budget, and DefaultClassifier.
// Most callers want [Retrier.Do].
//
// A Retrier keeps these promises, on which the stress package checks it:
//
//   - It never attempts on a done context, not even the first attempt.
//   - Every wait races ctx.Done(); a cancelled call returns at once.
//   - It starts no goroutine.
//   - It asks the budget once per retry, before waiting, and when the budget
//     says no it returns at once with ErrDenied, without waiting.
//   - It gives up at once (ErrNoTime) when the next wait would reach the
//     context's deadline or MaxElapsed.
//   - It tells the budget of the call's first attempt (Request) and of its
//     success (Success) exactly once each.
//   - It tells a [FailureCounter] of each retryable failure after which it
//     asks no retry (Failed): the call is out of attempts, no time is left
//     for the next wait, or the Classifier says the server forbade the
//     retry. With the retries it asks for, every retryable failure reaches
//     the budget exactly once; a failure after the context ended, or one
//     that is not retryable, reaches it never.
//   - It tells an [InFlightBudget] of the end of every attempt it started
//     (the first, and every granted retry) exactly once, after the
//     attempt's Success, and then of the end of the call, on every path:
//     success, a failure it does not retry, a denial, a cancelled context
//     (during a backoff wait too: a granted retry that never ran still
//     ends), giving up, and an operation that panics or calls
//     runtime.Goexit.
//   - It calls a [ContextBudget]'s Context methods instead of the plain
//     ones: with the call's context, and for Success with the call's
//     context freed of its cancellation, so that a success is counted even
//     when the context ends as the operation returns. A failed
//     RequestContext or SuccessContext does not change the call's outcome;
//     a failed RetryContext that grants nothing ends the call with
//     ErrBudgetUnavailable, never ErrDenied.
//   - A server-supplied delay (an error with a RetryAfter() time.Duration
//     method) replaces the backoff, capped at MaxDelay.
//   - Every attempt of one call sees the same dedup key.
//   - Its Hooks see each attempt before it starts, each answer of the
//     budget to a retry, and each call that ends without a success, on
//     the calling goroutine.
//
// A Retrier is safe for concurrent use by multiple goroutines, and should be
// shared along with its Budget.
type Retrier struct {
	// Budget is asked before every retry. Nil means no budget: retries are
	// limited by MaxAttempts and time only.
	Budget Budget
	// MaxAttempts bounds the attempts of one call, the first included.
	// Zero means 3; 1 means never retry.
	MaxAttempts int
	// BaseDelay and MaxDelay shape the backoff: before retry n (n = 1, 2,
	// ...) the Retrier waits a random duration in [0, min(MaxDelay,
	// BaseDelay×2^(n-1))], "full jitter". MaxDelay also caps a
	// server-supplied delay. Zero means 100ms and 20s.
	BaseDelay, MaxDelay time.Duration
	// MaxElapsed, if positive, bounds the time from the start of a call to
	// the start of its last attempt: no wait may end past it.
	MaxElapsed time.Duration
	// Classify says which errors are retried. Nil means DefaultClassifier.
	Classify Classifier
	// Jitter, if set, picks a wait in [0, ceiling]. Nil means a uniform
	// random pick. Tests use it to make waits exact.
	Jitter func(ceiling time.Duration) time.Duration
	// Hooks observe the calls: each attempt, each retry the budget grants
	// or denies, each give-up. The zero Hooks observe nothing.
	Hooks Hooks
}

// Hooks observe a Retrier's calls, for metrics and logs. Each field may be
// nil. A hook runs on the goroutine that called [Retrier.Do], in the
// order of the events, and the call waits for it: a hook must be quick and
// must not call the Retrier back. The events carry values only, so a hook
// that keeps one keeps no reference into the call.
type Hooks struct {
	// OnAttempt runs before each attempt starts, the first included.
	OnAttempt func(ctx context.Context, a Attempt)
	// OnRetry runs when a failed attempt is to be retried and the budget
	// has answered, whether it granted the retry or not.
	OnRetry func(ctx context.Context, e RetryEvent)
	// OnGiveUp runs once when a call returns without a success: the
	// operation's error was not retryable, the budget denied a retry or
	// could not answer, the attempts or the time ran out, or ctx ended.
	// It does not run for a call that ends by a panic or runtime.Goexit.
	OnGiveUp func(ctx context.Context, e GiveUpEvent)
}

// A RetryEvent describes the budget's answer to one retry.
type RetryEvent struct {
	// Attempt is the attempt that failed; the retry would be attempt
	// Attempt.N+1.
	Attempt Attempt
	// Kind is the retry's kind, Transient or Throttled.
	Kind Kind
	// Granted reports whether the budget granted the retry.
	Granted bool
	// Delay is the wait before the retry: the backoff or the server's
	// delay, capped at MaxDelay. For a denied retry it is the wait the
	// retry would have had.
	Delay time.Duration
	// Err is the error of the failed attempt; BudgetErr is the error of a
	// ContextBudget that could not answer, else nil.
	Err, BudgetErr error
}

// A GiveUpEvent describes a call that ended without a success.
type GiveUpEvent struct {
	// Attempts is the number of attempts the call started.
	Attempts int
	// Kind is the kind of retry the last failure called for, or
	// FirstAttempt when it was not retryable.
	Kind Kind
	// Err is what [Retrier.Do] returns: test it with errors.Is for
	// ErrDenied, ErrAttempts, ErrNoTime, ErrBudgetUnavailable or a context
	// error to tell why.
	Err error
}

// An Attempt tells the operation which attempt of a call it is running.
type Attempt struct {
	N    int  // 1 for the first attempt, 2 for the first retry, ...
	Kind Kind // FirstAttempt, or the kind of failure this retry follows
	Key  Key  // the call's dedup key, the same for every attempt
}

// A Key identifies one call across its attempts, so that a server can drop a
// retried request it already carried out. It is 128 random bits.
type Key [16]byte

// String returns the key in hexadecimal.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

func newKey() Key {
	var k Key
	a, b := rand.Uint64(), rand.Uint64()
	for i := range 8 {
		k[i], k[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
	}
	return k
}

// Do calls op until it succeeds or the Retrier gives up, and returns nil or
// why it gave up:
//
//   - op's error itself, when the error is not retryable;
//   - an error wrapping ErrDenied, ErrAttempts or ErrNoTime and op's last
//     error;
//   - an error wrapping ErrBudgetUnavailable, op's last error and the
//     budget's error, when a ContextBudget failed to answer;
//   - ctx's error joined with op's last error (if any), when ctx ends.
func (r *Retrier) Do(ctx context.Context, op func(ctx context.Context, a Attempt) error) error {
	if err := ctx.Err(); err != nil {
		return err // not even the first attempt
	}
	b := r.Budget
	if b == nil {
		b = noBudget{}
	}
	cb, _ := b.(ContextBudget)
	maxAttempts := r.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
	}
	var start time.Time // read only when MaxElapsed needs it: the clock is the slowest part of a successful call
	if r.MaxElapsed > 0 {
		start = time.Now()
	}
	a := Attempt{N: 1, Kind: FirstAttempt, Key: newKey()}
	if cb != nil {
		_ = cb.RequestContext(ctx) // the budget reports its own errors; the attempt is free
	} else {
		b.Request()
	}
	if ib, ok := b.(InFlightBudget); ok {
		// open is the kind of the attempt started and not yet ended: the
		// first attempt now, a granted retry from its grant.
		open := &inFlightCall{b: ib, started: true}
		defer open.end()
		return r.gaveUp(ctx, r.loop(ctx, op, b, cb, maxAttempts, start, a, open))
	}
	return r.gaveUp(ctx, r.loop(ctx, op, b, cb, maxAttempts, start, a, nil))
}

// gaveUp reports a call that ended without success to OnGiveUp, and
// returns its error.
func (r *Retrier) gaveUp(ctx context.Context, e GiveUpEvent) error {
	if e.Err != nil && r.Hooks.OnGiveUp != nil {
		r.Hooks.OnGiveUp(ctx, e)
	}
	return e.Err
}

// inFlightCall tracks, for an InFlightBudget, the attempt a call has
// started and not yet ended.
type inFlightCall struct {
	b       InFlightBudget
	started bool
	kind    Kind
}

// attemptEnded ends the attempt that has started.
func (c *inFlightCall) attemptEnded() {
	if c != nil && c.started {
		c.started = false
		c.b.AttemptEnd(c.kind)
	}
}

// retryStarted records a granted retry of kind.
func (c *inFlightCall) retryStarted(kind Kind) {
	if c != nil {
		c.started, c.kind = true, kind
	}
}

// end ends the attempt still open, if any, then the call; it runs
// deferred, so a panicking operation ends both too.
func (c *inFlightCall) end() {
	c.attemptEnded()
	c.b.CallEnd()
}

func (r *Retrier) loop(ctx context.Context, op func(ctx context.Context, a Attempt) error, b Budget, cb ContextBudget,
	maxAttempts int, start time.Time, a Attempt, open *inFlightCall) GiveUpEvent {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	h := &r.Hooks
	for {
		if h.OnAttempt != nil {
			h.OnAttempt(ctx, a)
		}
		err := op(ctx, a)
		if err == nil {
			if cb != nil {
				_ = cb.SuccessContext(context.WithoutCancel(ctx), a.Kind)
			} else {
				b.Success(a.Kind)
			}
			open.attemptEnded()
			return GiveUpEvent{}
		}
		open.attemptEnded()
		if ctx.Err() != nil {
			return GiveUpEvent{a.N, FirstAttempt, errors.Join(ctx.Err(), err)}
		}
		kind, retryable := r.classify(err)
		if !retryable {
			failed(b, kind) // a retry the server forbade
			return GiveUpEvent{a.N, FirstAttempt, err}
		}
		if a.N >= maxAttempts {
			failed(b, kind)
			return GiveUpEvent{a.N, kind, fmt.Errorf("%w after %d attempts: %w", ErrAttempts, a.N, err)}
		}
		wait := r.wait(a.N, err)
		if r.tooLate(ctx, start, wait) {
			failed(b, kind)
			return GiveUpEvent{a.N, kind, fmt.Errorf("%w (next wait %v): %w", ErrNoTime, wait, err)}
		}
		var granted bool
		var berr error
		if cb != nil {
			granted, berr = cb.RetryContext(ctx, kind)
		} else {
			granted = b.Retry(kind)
		}
		if h.OnRetry != nil {
			h.OnRetry(ctx, RetryEvent{Attempt: a, Kind: kind, Granted: granted, Delay: wait, Err: err, BudgetErr: berr})
		}
		if !granted {
			if berr != nil {
				if cerr := ctx.Err(); cerr != nil {
					return GiveUpEvent{a.N, kind, errors.Join(cerr, err)}
				}
				return GiveUpEvent{a.N, kind, fmt.Errorf("%w after %d attempts: %w; the budget: %w", ErrBudgetUnavailable, a.N, err, berr)}
			}
			return GiveUpEvent{a.N, kind, fmt.Errorf("%w after %d attempts: %w", ErrDenied, a.N, err)}
		}
		open.retryStarted(kind)
		if wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-ctx.Done():
				return GiveUpEvent{a.N, kind, errors.Join(ctx.Err(), err)}
			case <-timer.C:
			}
		}
		// The wait may have ended together with the context: check again,
		// by the clock as well, since a deadline that has just passed may
		// not have cancelled the context yet.
		if cerr := ctx.Err(); cerr != nil {
			return GiveUpEvent{a.N, kind, errors.Join(cerr, err)}
		}
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			return GiveUpEvent{a.N, kind, errors.Join(context.DeadlineExceeded, err)}
		}
		if r.MaxElapsed > 0 && time.Since(start) >= r.MaxElapsed {
			return GiveUpEvent{a.N, kind, fmt.Errorf("%w (MaxElapsed %v): %w", ErrNoTime, r.MaxElapsed, err)}
		}
		a.N++
		a.Kind = kind
	}
}

// failed tells b, if it is a FailureCounter, of a failure of kind after
// which the call asks no retry; a kind that is not a retry kind is no
// retryable failure, and is told to no budget.
func failed(b Budget, kind Kind) {
	if fc, ok := b.(FailureCounter); ok && kind.IsRetry() {
		fc.Failed(kind)
	}
}

// Do calls op under r, as [Retrier.Do] does, and returns its value.
func Do[T any](ctx context.Context, r *Retrier, op func(ctx context.Context, a Attempt) (T, error)) (T, error) {
	var v T
	err := r.Do(ctx, func(ctx context.Context, a Attempt) error {
		var err error
		v, err = op(ctx, a)
		return err
	})
	return v, err
}

func (r *Retrier) classify(err error) (Kind, bool) {
	if r.Classify != nil {
		return r.Classify(err)
	}
	return DefaultClassifier(err)
}

// wait returns how long to wait before retry n: the server's delay if the
// error carries one, else full-jitter backoff; both capped at MaxDelay.
func (r *Retrier) wait(n int, err error) time.Duration {
	maxDelay := r.MaxDelay
	if maxDelay <= 0 {
		maxDelay = DefaultMaxDelay
	}
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return min(max(ra.RetryAfter(), 0), maxDelay)
	}
	base := r.BaseDelay
	if base <= 0 {
		base = DefaultBaseDelay
	}
	// base<<(n-1) is the ceiling when it is at most maxDelay, which is
	// when base <= maxDelay>>(n-1); a shift of 63 or more leaves 0, so a
	// product too large for a Duration never passes.
	ceiling := maxDelay
	if base <= maxDelay>>(n-1) {
		ceiling = base << (n - 1)
	}
	if r.Jitter != nil {
		return min(max(r.Jitter(ceiling), 0), ceiling)
	}
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}

// tooLate reports whether a wait starting now would end at or after the
// context's deadline or the call's MaxElapsed.
func (r *Retrier) tooLate(ctx context.Context, start time.Time, wait time.Duration) bool {
	end := time.Now().Add(wait)
	if d, ok := ctx.Deadline(); ok && !end.Before(d) {
		return true
	}
	return r.MaxElapsed > 0 && end.Sub(start) >= r.MaxElapsed
}

// DefaultClassifier retries every error except context errors and errors
// marked with [MarkPermanent]. An error marked with [MarkThrottled], or with
// a RetryAfter() time.Duration method, is retried as Throttled; an error
// marked with [MarkTransient], and any other error, as Transient.
func DefaultClassifier(err error) (Kind, bool) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return FirstAttempt, false
	}
	var m *markedError
	if errors.As(err, &m) {
		return m.kind, m.kind.IsRetry()
	}
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return Throttled, true
	}
	return Transient, true
}

// markedError carries a classification chosen by the operation.
type markedError struct {
	err   error
	kind  Kind // FirstAttempt means permanent
	after time.Duration
}

func (e *markedError) Error() string { return e.err.Error() }
func (e *markedError) Unwrap() error { return e.err }

// MarkPermanent marks err as not retryable. It returns nil for a nil err.
func MarkPermanent(err error) error {
	if err == nil {
		return nil
	}
	return &markedError{err: err, kind: FirstAttempt}
}

// MarkTransient marks err as retryable as Transient. It returns nil for a
// nil err.
func MarkTransient(err error) error {
	if err == nil {
		return nil
	}
	return &markedError{err: err, kind: Transient}
}

// MarkThrottled marks err as retryable as Throttled, after the
// server-supplied delay retryAfter (zero if the server gave none), which the
// Retrier honours up to its MaxDelay. It returns nil for a nil err.
func MarkThrottled(err error, retryAfter time.Duration) error {
	if err == nil {
		return nil
	}
	if retryAfter > 0 {
		return &retryAfterError{markedError{err: err, kind: Throttled, after: retryAfter}}
	}
	return &markedError{err: err, kind: Throttled}
}

type retryAfterError struct{ markedError }

func (e *retryAfterError) RetryAfter() time.Duration { return e.after }
func (e *retryAfterError) Unwrap() error             { return &e.markedError }

// noBudget grants every retry.
type noBudget struct{}

func (noBudget) Request()        {}
func (noBudget) Retry(Kind) bool { return true }
func (noBudget) Success(Kind)    {}

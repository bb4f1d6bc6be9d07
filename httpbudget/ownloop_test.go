package httpbudget_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/httpbudget"
	"github.com/retrybudget/retrybudget/internal/subjects/ownloop"
)

// hedge is a hedging loop of a team's own: it starts a first attempt, and
// a second beside it when hedgeWhen is closed, or after the first fails
// with a failure to retry. The first success wins. When every attempt
// started has failed, it returns the last failure. As it returns, it
// cancels the attempts still running, whose contexts are one, and waits
// for them.
type hedge struct {
	hedgeWhen <-chan struct{}
}

var _ budget.Loop = hedge{}

func (l hedge) Do(ctx context.Context, op func(context.Context, budget.Attempt) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	actx, cancel := context.WithCancel(ctx)
	outcomes := make(chan error)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		go func() { wg.Wait(); close(outcomes) }()
		for range outcomes { // the losers
		}
	}()
	started, running := 0, 0
	send := func() {
		started++
		running++
		a := budget.Attempt{N: started}
		wg.Go(func() { outcomes <- op(actx, a) })
	}
	send()
	hedgeWhen := l.hedgeWhen
	for {
		select {
		case <-hedgeWhen:
			hedgeWhen = nil
			if started < 2 {
				send()
			}
		case err := <-outcomes:
			running--
			switch {
			case err == nil:
				return nil
			case ctx.Err() != nil:
				return errors.Join(ctx.Err(), err)
			case !ownloop.ReadErr(err).Retry:
				return err
			case started < 2:
				send()
			case running == 0:
				return fmt.Errorf("%w: %w", ownloop.ErrGaveUp, err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// A bodies is a Base that answers each attempt with answer(n, req), n
// counting from 1, and keeps every response body it gave, tracked.
type bodies struct {
	answer func(n int, req *http.Request) (*http.Response, error)

	mu     sync.Mutex
	n      int
	bodies []*trackedBody
}

func (b *bodies) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.n++
	n := b.n
	b.mu.Unlock()
	resp, err := b.answer(n, req)
	if resp != nil {
		all, _ := io.ReadAll(resp.Body)
		tb := &trackedBody{r: strings.NewReader(string(all)), size: len(all)}
		resp.Body = tb
		b.mu.Lock()
		b.bodies = append(b.bodies, tb)
		b.mu.Unlock()
	}
	return resp, err
}

// attempts returns how many attempts b has answered.
func (b *bodies) attempts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// open returns how many of the bodies b gave are still open.
func (b *bodies) open() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, tb := range b.bodies {
		if !tb.closed.Load() {
			n++
		}
	}
	return n
}

// Through a loop of a team's own, the Transport retries failure responses
// over the network, and tells the loop what each came to through
// budget.DefaultClassifier and the RetryAfter method; the body of the
// response returned outlives the contexts of the attempts, which the loop
// ends as each returns.
func TestOwnLoopRetries(t *testing.T) {
	big := strings.Repeat("ok", 64<<10) // more than a connection buffers
	s := serve(t, step{status: 502}, step{status: 429, retryAfter: "7"}, step{status: 200, body: big})
	loop := &ownloop.Tries{Max: 3}
	status, body, err := send(t, &httpbudget.Transport{Base: s.Client().Transport, Retrier: loop}, s.get(t))
	if err != nil || status != 200 || body != big {
		t.Fatalf("RoundTrip() = %d (%d bytes), %v; want 200 and its %d bytes", status, len(body), err, len(big))
	}
	if n := len(s.received()); n != 3 {
		t.Errorf("server received %d requests; want 3", n)
	}
	want := []ownloop.Read{{Kind: budget.Transient, Retry: true}, {Kind: budget.Throttled, Retry: true, Delay: 7 * time.Second, HasDelay: true}}
	if got := loop.Reads(); !slices.Equal(got, want) {
		t.Errorf("the loop read %v; want %v", got, want)
	}
}

// When a loop of a team's own gives up on a response, the caller gets it,
// body whole, and no error; every other body is closed, and so is one read
// ahead, whose bytes the response keeps. A response not to retry reaches
// the loop as not retryable, and is returned at once, its body unread.
func TestOwnLoopGivesUpOnResponse(t *testing.T) {
	for _, tt := range []struct {
		name     string
		status   int
		attempts int
		read     ownloop.Read
		open     int // bodies of Base open before the caller closes its own
	}{
		{"OutOfAttempts", 503, 2, ownloop.Read{Kind: budget.Throttled, Retry: true}, 0},
		{"NotRetried", 404, 1, ownloop.Read{Kind: budget.FirstAttempt, Retry: false}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := &bodies{answer: func(n int, req *http.Request) (*http.Response, error) {
				return respond(req, tt.status, nil, fmt.Sprint("answer ", n)), nil
			}}
			loop := &ownloop.Tries{Max: 2}
			req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
			resp, err := (&httpbudget.Transport{Base: base, Retrier: loop}).RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip() = %v; want the last response", err)
			}
			if base.attempts() != tt.attempts {
				t.Errorf("%d attempts; want %d", base.attempts(), tt.attempts)
			}
			if got := loop.Reads(); len(got) != tt.attempts || got[len(got)-1] != tt.read {
				t.Errorf("the loop read %v; want %d reads, the last %v", got, tt.attempts, tt.read)
			}
			if n := base.open(); n != tt.open {
				t.Errorf("%d bodies open; want %d", n, tt.open)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := fmt.Sprint("answer ", tt.attempts); resp.StatusCode != tt.status || string(body) != want {
				t.Errorf("RoundTrip() = %d %q; want %d %q", resp.StatusCode, body, tt.status, want)
			}
			if n := base.open(); n != 0 {
				t.Errorf("%d bodies open after the caller closed its own; want 0", n)
			}
		})
	}
}

// When a loop of a team's own gives up on an error of Base, RoundTrip
// returns the loop's error; one that returns nil with no response is an
// error too.
func TestOwnLoopError(t *testing.T) {
	refused := errors.New("connection refused")
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, refused })
	req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	resp, err := (&httpbudget.Transport{Base: base, Retrier: &ownloop.Tries{Max: 2}}).RoundTrip(req)
	if resp != nil || !errors.Is(err, ownloop.ErrGaveUp) || !errors.Is(err, refused) {
		t.Errorf("RoundTrip() = %v, %v; want the loop's error, wrapping Base's", resp, err)
	}

	nothing := ownloop.Func(func(context.Context, func(context.Context, budget.Attempt) error) error { return nil })
	body := &trackedBody{r: strings.NewReader("x"), size: 1}
	req, _ = http.NewRequest(http.MethodPut, "http://example.test/", body)
	resp, err = (&httpbudget.Transport{Base: base, Retrier: nothing}).RoundTrip(req)
	if resp != nil || err == nil {
		t.Errorf("RoundTrip() = %v, %v with a loop that returns nil and runs nothing; want an error", resp, err)
	}
	if !body.closed.Load() {
		t.Error("the request body is open; want it closed")
	}
}

// A cancel returns at once, with context.Canceled, under a loop of a
// team's own: during its wait, and during an attempt; the response held
// is closed.
func TestOwnLoopCancel(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer func(n int, req *http.Request) (*http.Response, error)
	}{
		// The 503's body is longer than the Transport reads ahead: it
		// stays open until the Transport closes it.
		{"DuringWait", func(n int, req *http.Request) (*http.Response, error) {
			return respond(req, 503, nil, strings.Repeat("busy", 4<<10)), nil
		}},
		{"DuringAttempt", func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				return respond(req, 503, nil, strings.Repeat("busy", 4<<10)), nil
			}
			<-req.Context().Done()
			return nil, req.Context().Err()
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := &bodies{answer: tt.answer}
			wait := time.Hour
			if tt.name == "DuringAttempt" {
				wait = 0
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://example.test/", nil)
			start := time.Now()
			resp, err := (&httpbudget.Transport{Base: base, Retrier: &ownloop.Tries{Max: 3, Wait: wait}}).RoundTrip(req)
			if resp != nil || !errors.Is(err, context.Canceled) {
				t.Errorf("RoundTrip() = %v, %v after a cancel; want context.Canceled", resp, err)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("RoundTrip() took %v; want a return at once after the cancel", took)
			}
			if n := base.open(); n != 0 {
				t.Errorf("%d bodies open; want 0", n)
			}
		})
	}
}

// Under a loop that hedges, the attempt that succeeds wins: the caller gets
// its response, and every other response is closed, whether it comes after
// the win (its attempt cancelled) or before it, a failure.
func TestOwnLoopHedge(t *testing.T) {
	t.Run("LoserAfter", func(t *testing.T) {
		firstSent := make(chan struct{})
		base := &bodies{answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				close(firstSent)
				<-req.Context().Done() // the hedge has won
				return respond(req, 200, nil, "slow"), nil
			}
			return respond(req, 200, nil, "fast"), nil
		}}
		checkHedge(t, base, firstSent, "fast")
	})
	t.Run("FailureBefore", func(t *testing.T) {
		firstSent, hedgeSent := make(chan struct{}), make(chan struct{})
		var base *bodies
		base = &bodies{answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				close(firstSent)
				<-hedgeSent
				// Longer than the Transport reads ahead: it stays open
				// until the Transport closes it.
				return respond(req, 503, nil, strings.Repeat("busy", 4<<10)), nil
			}
			close(hedgeSent)
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				base.mu.Lock()
				read := len(base.bodies) > 0 && base.bodies[0].read.Load() > 0
				base.mu.Unlock()
				if read {
					break // the Transport has the first answer
				}
			}
			return respond(req, 200, nil, "hedge"), nil
		}}
		checkHedge(t, base, firstSent, "hedge")
	})
}

// checkHedge sends a GET through base under the hedge loop, which hedges
// once hedgeWhen is closed, and fails t unless the caller gets a 200 with
// body want, the only body of base left open, and closed with the caller's.
func checkHedge(t *testing.T, base *bodies, hedgeWhen chan struct{}, want string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	resp, err := (&httpbudget.Transport{Base: base, Retrier: hedge{hedgeWhen: hedgeWhen}}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if n := base.open(); n != 1 {
		t.Errorf("%d bodies open; want 1, the winner's", n)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || string(body) != want {
		t.Errorf("RoundTrip() = %d %q, reading %v; want 200 %q", resp.StatusCode, body, err, want)
	}
	if n := base.open(); n != 0 {
		t.Errorf("%d bodies open after the caller closed its own; want 0", n)
	}
}

// A loop that breaks its contract and returns while its attempt runs gets
// an error from RoundTrip; the attempt's response, when it comes, is
// closed, and a later attempt sends nothing.
func TestOwnLoopReturnsEarly(t *testing.T) {
	sent, returned, attemptDone := make(chan struct{}), make(chan struct{}), make(chan error, 2)
	var once sync.Once
	base := &bodies{answer: func(n int, req *http.Request) (*http.Response, error) {
		once.Do(func() { close(sent) })
		<-returned
		return respond(req, 200, nil, "late"), nil
	}}
	early := ownloop.Func(func(ctx context.Context, op func(context.Context, budget.Attempt) error) error {
		go func() {
			attemptDone <- op(context.Background(), budget.Attempt{N: 1})
			attemptDone <- op(context.Background(), budget.Attempt{N: 2})
		}()
		<-sent
		return ownloop.ErrGaveUp
	})
	req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	resp, err := (&httpbudget.Transport{Base: base, Retrier: early}).RoundTrip(req)
	close(returned)
	if resp != nil || !errors.Is(err, ownloop.ErrGaveUp) {
		t.Errorf("RoundTrip() = %v, %v; want the loop's error", resp, err)
	}
	<-attemptDone
	if err := <-attemptDone; err == nil {
		t.Error("an attempt after the loop returned succeeded; want an error, nothing sent")
	}
	if n := base.attempts(); n != 1 {
		t.Errorf("%d attempts sent; want 1", n)
	}
	if n := base.open(); n != 0 {
		t.Errorf("%d bodies open; want 0", n)
	}
}

// A request that may be sent only once is sent once under a loop of a
// team's own: its failure is marked not to retry; a loop deaf to that gets
// an attempt that sends nothing, and the caller the one response; a hedge
// waits for the attempt sent, rather than end the call before it answers.
func TestOwnLoopSentOnce(t *testing.T) {
	post := func(t *testing.T) *http.Request {
		req, err := http.NewRequest(http.MethodPost, "http://example.test/", strings.NewReader("order"))
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	t.Run("Marked", func(t *testing.T) {
		base := &bodies{answer: func(n int, req *http.Request) (*http.Response, error) { return respond(req, 503, nil, "busy"), nil }}
		loop := &ownloop.Tries{Max: 3}
		status, body, err := send(t, &httpbudget.Transport{Base: base, Retrier: loop}, post(t))
		if err != nil || status != 503 || body != "busy" || base.attempts() != 1 {
			t.Errorf("RoundTrip() = %d %q, %v after %d attempts; want 503 \"busy\" after 1", status, body, err, base.attempts())
		}
		if got, want := loop.Reads(), []ownloop.Read{{Kind: budget.FirstAttempt}}; !slices.Equal(got, want) {
			t.Errorf("the loop read %v; want %v", got, want)
		}
	})
	t.Run("DeafLoop", func(t *testing.T) {
		base := &bodies{answer: func(n int, req *http.Request) (*http.Response, error) { return respond(req, 503, nil, "busy"), nil }}
		status, body, err := send(t, &httpbudget.Transport{Base: base, Retrier: &ownloop.Tries{Max: 3, Deaf: true}}, post(t))
		if err != nil || status != 503 || body != "busy" || base.attempts() != 1 {
			t.Errorf("RoundTrip() = %d %q, %v after %d attempts; want 503 \"busy\" after 1", status, body, err, base.attempts())
		}
	})
	t.Run("Hedge", func(t *testing.T) {
		firstSent := make(chan struct{})
		var once sync.Once
		base := &bodies{answer: func(n int, req *http.Request) (*http.Response, error) {
			once.Do(func() { close(firstSent) })
			select {
			case <-req.Context().Done():
				return nil, req.Context().Err() // the loop gave up on it
			case <-time.After(50 * time.Millisecond):
			}
			return respond(req, 201, nil, "created"), nil
		}}
		status, body, err := send(t, &httpbudget.Transport{Base: base, Retrier: hedge{hedgeWhen: firstSent}}, post(t))
		if err != nil || status != 201 || body != "created" || base.attempts() != 1 {
			t.Errorf("RoundTrip() = %d %q, %v after %d attempts; want 201 \"created\" after 1", status, body, err, base.attempts())
		}
	})
}

// A POST retried under RetryNonIdempotent carries one Idempotency-Key on
// every attempt, though the loop gives its attempts no Key.
func TestOwnLoopKey(t *testing.T) {
	s := serve(t, step{status: 502}, step{status: 201})
	req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader("order"))
	tr := &httpbudget.Transport{Base: s.Client().Transport, Retrier: &ownloop.Tries{Max: 3}, RetryNonIdempotent: true}
	if status, _, err := send(t, tr, req); err != nil || status != 201 {
		t.Fatalf("RoundTrip() = %d, %v; want 201", status, err)
	}
	got := s.received()
	if len(got) != 2 {
		t.Fatalf("server received %d requests; want 2", len(got))
	}
	k1, k2 := got[0].header.Get("Idempotency-Key"), got[1].header.Get("Idempotency-Key")
	if len(k1) != 32 || k1 == strings.Repeat("0", 32) || k1 != k2 {
		t.Errorf("Idempotency-Key %q then %q; want one random key, twice", k1, k2)
	}
}

// BudgetFor needs a *budget.Retrier: with a loop of a team's own, every
// request fails at once, unsent, its body closed.
func TestOwnLoopBudgetFor(t *testing.T) {
	base := &bodies{answer: func(n int, req *http.Request) (*http.Response, error) { return respond(req, 200, nil, ""), nil }}
	tr := &httpbudget.Transport{
		Base:      base,
		Retrier:   &ownloop.Tries{Max: 3},
		BudgetFor: func(*http.Request) (budget.Budget, error) { return &recorder{}, nil },
	}
	body := &trackedBody{r: strings.NewReader("x"), size: 1}
	req, _ := http.NewRequest(http.MethodPut, "http://example.test/", body)
	resp, err := tr.RoundTrip(req)
	if resp != nil || err == nil || !strings.Contains(err.Error(), "BudgetFor needs a *budget.Retrier") {
		t.Errorf("RoundTrip() = %v, %v; want an error that says BudgetFor needs a *budget.Retrier", resp, err)
	}
	if n := base.attempts(); n != 0 {
		t.Errorf("%d attempts; want none", n)
	}
	if !body.closed.Load() {
		t.Error("the request body is open; want it closed")
	}
}

// A nil *budget.Retrier is the zero Retrier, as a nil Retrier is.
func TestNilRetrier(t *testing.T) {
	s := serve(t, step{status: 502}, step{status: 200})
	var r *budget.Retrier
	tr := &httpbudget.Transport{Base: s.Client().Transport, Retrier: r}
	if status, _, err := send(t, tr, s.get(t)); err != nil || status != 200 {
		t.Fatalf("RoundTrip() = %d, %v; want 200 on the retry", status, err)
	}
}

// An attempt whose context ends while it is sent, by a loop's timeout per
// attempt, fails with that context's error, for the loop to read.
func TestOwnLoopAttemptDeadline(t *testing.T) {
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		<-req.Context().Done()
		return nil, req.Context().Err()
	})
	perAttempt := ownloop.Func(func(ctx context.Context, op func(context.Context, budget.Attempt) error) error {
		actx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		return op(actx, budget.Attempt{N: 1})
	})
	req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	if resp, err := (&httpbudget.Transport{Base: base, Retrier: perAttempt}).RoundTrip(req); resp != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RoundTrip() = %v, %v; want context.DeadlineExceeded, the attempt's", resp, err)
	}
}

// A loop that breaks its contract and runs an attempt after one succeeded
// gets an error for it, and nothing is sent; the caller gets the success.
func TestOwnLoopAttemptAfterSuccess(t *testing.T) {
	base := &bodies{answer: func(n int, req *http.Request) (*http.Response, error) {
		return respond(req, 200, nil, fmt.Sprint("answer ", n)), nil
	}}
	var again error
	twice := ownloop.Func(func(ctx context.Context, op func(context.Context, budget.Attempt) error) error {
		err := op(ctx, budget.Attempt{N: 1})
		again = op(ctx, budget.Attempt{N: 2})
		return err
	})
	req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	status, body, err := send(t, &httpbudget.Transport{Base: base, Retrier: twice}, req)
	if err != nil || status != 200 || body != "answer 1" {
		t.Errorf("RoundTrip() = %d %q, %v; want 200 \"answer 1\"", status, body, err)
	}
	if again == nil || base.attempts() != 1 {
		t.Errorf("the attempt after the success = %v, with %d attempts sent; want an error, and 1 sent", again, base.attempts())
	}
}

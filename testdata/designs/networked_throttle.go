package designs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/retrybudget/retrybudget/budget"
)

// netConns is how many loopback connections a NetworkedThrottle keeps.
const netConns = 4

// The operations of NetworkedThrottle's wire protocol: one byte a request,
// answered by one byte (granted or not) and the count after the operation,
// eight bytes big-endian.
const (
	netRetry     byte = 1
	netSuccess   byte = 2
	netAvailable byte = 3
)

// NetworkedThrottle is gRPC retry throttling (gRFC A6) whose token count
// lives in a tiny TCP server in the same process: the constructor listens
// on a free port of 127.0.0.1, starts an accept loop and dials a pool of
// netConns loopback connections to it; the server serves each connection
// on a goroutine of its own, and applies each request to the count under
// its mutex. Every call of the budget is one request and one response on a
// connection it takes from the pool (a buffered channel; a call waits
// while all are busy) and puts back.
//
// Close stops it all: it marks the budget closed under the client's mutex,
// waits for the calls already on the wire, closes the connections (each
// server goroutine then reads EOF and ends) and the listener (the accept
// loop ends), waits for every server goroutine, and only then opens the
// count to calls made afterwards, which apply themselves to it under the
// same mutex the server used.
//
// Linearizability: the count is only ever read and written under smu,
// once per call: by the server goroutine serving the call's request,
// which it receives after the call has sent it and answers before the call
// can read the answer, so the change falls inside the call; or, after
// Close, by the call itself. Each call is linearized at its critical
// section under smu, and those are totally ordered. A call is counted in
// flight (wire) before the closed flag could be set, so Close's wait
// covers it; a call that finds the flag set waits for handed, closed
// after the last server goroutine has ended, so no call's effect is lost
// or applied twice. The one-byte request is applied exactly once: the
// server answers every request it reads, and a connection error (which a
// loopback connection in one process does not have) panics rather than
// guessing.
type NetworkedThrottle struct {
	cfg ThrottleConfig

	smu    sync.Mutex
	tokens int64 // milli-tokens; guarded by smu

	ln      net.Listener
	servers sync.WaitGroup // the accept loop and every connection's server
	pool    chan net.Conn  // the client ends not in use

	cmu    sync.Mutex // guards closed, and orders wire.Add before Close's Wait
	closed bool
	wire   sync.WaitGroup // calls on the wire
	handed chan struct{}  // closed when the server has stopped for good
	once   sync.Once
}

var _ budget.Budget = (*NetworkedThrottle)(nil)

// NewNetworkedThrottle returns a full NetworkedThrottle with its server
// running on a free loopback port; Close stops it.
func NewNetworkedThrottle(cfg ThrottleConfig) (*NetworkedThrottle, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &NetworkedThrottle{
		cfg:    cfg,
		tokens: cfg.Max,
		ln:     ln,
		pool:   make(chan net.Conn, netConns),
		handed: make(chan struct{}),
	}
	t.servers.Add(1)
	go t.accept()
	for range netConns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.shutdown()
			return nil, err
		}
		t.pool <- c
	}
	return t, nil
}

// accept serves every connection the listener accepts, until it is closed.
func (t *NetworkedThrottle) accept() {
	defer t.servers.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			return
		}
		t.servers.Add(1)
		go t.serve(c)
	}
}

// serve answers the requests of one connection until the client closes it.
func (t *NetworkedThrottle) serve(c net.Conn) {
	defer t.servers.Done()
	defer c.Close()
	var req [1]byte
	var resp [9]byte
	for {
		if _, err := io.ReadFull(c, req[:]); err != nil {
			return
		}
		granted, tokens := t.apply(req[0])
		resp[0] = 0
		if granted {
			resp[0] = 1
		}
		binary.BigEndian.PutUint64(resp[1:], uint64(tokens))
		if _, err := c.Write(resp[:]); err != nil {
			return
		}
	}
}

// apply applies one operation to the count under smu and returns its
// answer and the count after it.
func (t *NetworkedThrottle) apply(op byte) (granted bool, tokens int64) {
	t.smu.Lock()
	defer t.smu.Unlock()
	switch op {
	case netRetry:
		t.tokens, granted = t.cfg.retry(t.tokens)
	case netSuccess:
		t.tokens = t.cfg.success(t.tokens)
	}
	return granted, t.tokens
}

// call sends op to the server and returns its answer, or applies op itself
// once the budget is closed.
func (t *NetworkedThrottle) call(op byte) (bool, int64) {
	t.cmu.Lock()
	if t.closed {
		t.cmu.Unlock()
		<-t.handed
		return t.apply(op)
	}
	t.wire.Add(1)
	t.cmu.Unlock()
	defer t.wire.Done()

	c := <-t.pool
	defer func() { t.pool <- c }()
	var resp [9]byte
	if _, err := c.Write([]byte{op}); err != nil {
		panic(fmt.Sprintf("designs: NetworkedThrottle: sending a request: %v", err))
	}
	if _, err := io.ReadFull(c, resp[:]); err != nil {
		panic(fmt.Sprintf("designs: NetworkedThrottle: reading a response: %v", err))
	}
	return resp[0] == 1, int64(binary.BigEndian.Uint64(resp[1:]))
}

// Request does nothing, and sends nothing.
func (t *NetworkedThrottle) Request() {}

// Retry takes one token for a retryable failure of kind k and reports
// whether more than half the maximum is left. A kind that is not a retry
// kind is denied and sends nothing.
func (t *NetworkedThrottle) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	granted, _ := t.call(netRetry)
	return granted
}

// Success adds the ratio's tokens, up to the maximum, whatever the kind.
func (t *NetworkedThrottle) Success(budget.Kind) { t.call(netSuccess) }

// Available returns the token count.
func (t *NetworkedThrottle) Available() float64 {
	_, tokens := t.call(netAvailable)
	return float64(tokens) / milli
}

// Close stops the server and closes every connection, after the calls on
// the wire have been answered. The budget keeps working after it, on its
// own. Close is safe to call more than once.
func (t *NetworkedThrottle) Close() error {
	var err error
	t.once.Do(func() {
		t.cmu.Lock()
		t.closed = true
		t.cmu.Unlock()
		t.wire.Wait()
		err = t.shutdown()
	})
	<-t.handed
	return err
}

// shutdown closes the connections in the pool and the listener, waits for
// the server's goroutines and closes handed. No call may be on the wire.
func (t *NetworkedThrottle) shutdown() error {
	var errs []error
	for n := len(t.pool); n > 0; n-- {
		errs = append(errs, (<-t.pool).Close())
	}
	errs = append(errs, t.ln.Close())
	t.servers.Wait()
	close(t.handed)
	return errors.Join(errs...)
}

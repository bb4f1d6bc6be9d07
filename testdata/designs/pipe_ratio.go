package designs

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"sync"

	"github.com/retrybudget/retrybudget/budget"
)

// The operations of PipeRatio's protocol: one byte a request, answered by
// one byte (granted or not) and, for pipeAvailable, the balance's float64
// bits, eight bytes big-endian.
const (
	pipeRequest   byte = 1
	pipeRetry     byte = 2
	pipeAvailable byte = 3
)

// PipeRatio is a sliding-window ratio budget whose state belongs to a
// server goroutine at the far end of a net.Pipe, an in-memory, synchronous,
// full-duplex connection: the goroutine reads a one-byte request, reads the
// clock, applies the request to its ring of slots and writes the answer.
// Callers share the near end under a mutex, one request and its response at
// a time. Close closes the near end; the server then reads EOF, closes its
// end and signals done, and calls made afterwards apply themselves to the
// ring under the same mutex.
//
// Linearizability: while the server runs only it touches the ring and the
// clock, and it handles one request at a time, each after the caller has
// written it and before the caller can read the answer; a call is
// linearized at the server's clock read for it. After Close (which holds
// the mutex while it closes the pipe and waits for done) only callers
// holding the mutex touch the ring, and done's closing orders the server's
// last access before them. A retry of a kind that is not a retry kind, and
// Success, send nothing and change nothing.
type PipeRatio struct {
	cfg   RatioConfig
	clock budget.Clock

	mu     sync.Mutex // one exchange on the pipe at a time; the ring's lock once closed
	conn   net.Conn   // the near end
	closed bool
	done   chan struct{} // closed when the server has stopped

	st slotRing // the server's, until done is closed
}

var _ budget.Budget = (*PipeRatio)(nil)

// NewPipeRatio returns an empty PipeRatio on clock, which must be non-nil,
// and starts its server; Close stops it.
func NewPipeRatio(cfg RatioConfig, clock budget.Clock) *PipeRatio {
	near, far := net.Pipe()
	r := &PipeRatio{cfg: cfg, clock: clock, conn: near, done: make(chan struct{})}
	r.st = cfg.newSlotRing(clock.Now())
	go r.serve(far)
	return r
}

// serve is the server: it owns st until it closes done.
func (r *PipeRatio) serve(c net.Conn) {
	defer close(r.done)
	defer c.Close()
	var req [1]byte
	var resp [9]byte
	for {
		if _, err := io.ReadFull(c, req[:]); err != nil {
			return
		}
		granted, avail := r.apply(req[0])
		resp[0] = 0
		if granted {
			resp[0] = 1
		}
		binary.BigEndian.PutUint64(resp[1:], math.Float64bits(avail))
		if _, err := c.Write(resp[:]); err != nil {
			return
		}
	}
}

// apply applies one operation to the ring; its caller owns the ring.
func (r *PipeRatio) apply(op byte) (granted bool, avail float64) {
	switch op {
	case pipeRequest:
		r.cfg.request(&r.st, r.clock.Now())
	case pipeRetry:
		granted = r.cfg.retry(&r.st, r.clock.Now())
	case pipeAvailable:
		avail = r.cfg.availableAt(&r.st, r.clock.Now())
	}
	return granted, avail
}

// call makes one exchange with the server, or applies op itself once the
// budget is closed.
func (r *PipeRatio) call(op byte) (bool, float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return r.apply(op)
	}
	var resp [9]byte
	if _, err := r.conn.Write([]byte{op}); err != nil {
		panic(fmt.Sprintf("designs: PipeRatio: sending a request: %v", err))
	}
	if _, err := io.ReadFull(r.conn, resp[:]); err != nil {
		panic(fmt.Sprintf("designs: PipeRatio: reading a response: %v", err))
	}
	return resp[0] == 1, math.Float64frombits(binary.BigEndian.Uint64(resp[1:]))
}

// Request counts a request in the current slot.
func (r *PipeRatio) Request() { r.call(pipeRequest) }

// Retry reports whether one more retry keeps the window within its limit,
// and counts it if so. A kind that is not a retry kind is denied and
// counted nowhere.
func (r *PipeRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	granted, _ := r.call(pipeRetry)
	return granted
}

// Success does nothing: the budget recovers as its window slides.
func (r *PipeRatio) Success(budget.Kind) {}

// Available returns how many more retries the window would grant as of the
// clock's reading now; it changes nothing.
func (r *PipeRatio) Available() float64 {
	_, avail := r.call(pipeAvailable)
	return avail
}

// Close stops the server and waits for it. The budget keeps working after
// it, on its own. Close is safe to call more than once.
func (r *PipeRatio) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	err := r.conn.Close()
	<-r.done
	r.closed = true
	return err
}

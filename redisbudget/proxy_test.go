package redisbudget_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// A faultProxy is a TCP proxy on loopback, put between clients and a
// server to make network faults: delays, lost replies, a black hole, cut
// connections, refused connections and half-open connections. It forwards
// what it reads in chunks (one read, one write), and each mode applies to
// whole chunks. The modes can be switched at any time from any goroutine;
// a mode switched on applies to the chunks read from then on, on existing
// connections and new ones alike.
type faultProxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // done when the proxy stops
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and every connection's goroutines

	delay       atomic.Int64 // a time.Duration
	dropReplies atomic.Bool
	blackhole   atomic.Bool
	refuse      atomic.Bool

	mu      sync.Mutex
	conns   map[*proxyConn]struct{}
	stopped bool

	accepted, refused atomic.Int64
	forwarded         [2]atomic.Int64 // bytes, by proxyDirection
	dropped           [2]atomic.Int64 // bytes, by proxyDirection
	droppedReplies    atomic.Int64
	delaying          atomic.Int64
}

// A proxyDirection is the way a chunk goes through a faultProxy.
type proxyDirection int

const (
	toServer proxyDirection = iota // from a client to the server
	toClient                       // from the server to a client
)

// A proxyConn is one client's connection through a faultProxy, and the
// proxy's connection to the server for it.
type proxyConn struct {
	client net.Conn
	ctx    context.Context // done when the connection is closed
	cancel context.CancelFunc
	frozen atomic.Bool // set by halfOpen: nothing is read or written any more

	mu     sync.Mutex
	server net.Conn // nil until dialed
	closed bool
}

// proxyStats counts what a faultProxy has done since it started.
type proxyStats struct {
	accepted int64 // connections accepted, refused ones included
	refused  int64 // connections closed at once by setRefuse
	// toServer and toClient are the bytes forwarded each way, counted as
	// the proxy writes them.
	toServer, toClient int64
	// droppedToServer and droppedToClient are the bytes read and
	// discarded each way (by setBlackhole, setDropReplies or halfOpen).
	droppedToServer, droppedToClient int64
	// droppedReplies is the chunks from the server discarded by
	// setDropReplies or setBlackhole.
	droppedReplies int64
	delaying       int64 // chunks waiting out their delay now
}

// newFaultProxy listens on 127.0.0.1:0 and forwards every connection to
// target, which must be an address in 127.0.0.0/8 ("127.0.0.1:6379"). It
// stops at the test's cleanup: it closes the listener and every connection,
// and waits for its goroutines.
func newFaultProxy(t testing.TB, target string) *faultProxy {
	t.Helper()
	if ap, err := netip.ParseAddrPort(target); err != nil || !ap.Addr().Is4() || !ap.Addr().IsLoopback() {
		t.Fatalf("newFaultProxy(%q): the target must be an address in 127.0.0.0/8", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &faultProxy{target: target, ln: ln, ctx: ctx, cancel: cancel, conns: map[*proxyConn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.stop)
	return p
}

// addr returns the address clients dial, "127.0.0.1:port".
func (p *faultProxy) addr() string { return p.ln.Addr().String() }

// setDelay delays every chunk forwarded in either direction by d (0: none).
// A chunk is delayed after it is read, so a request and its reply are each
// delayed: a round trip takes at least 2d longer. The chunks of one
// direction of a connection keep their order, and the delays add up when
// a client sends faster than one chunk per d.
func (p *faultProxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

// setDropReplies turns on or off the loss of replies: while on, what the
// server sends is read and discarded, and requests still reach the server.
// The server runs a command but its reply is lost, so the caller times out
// although the command took effect. Existing connections stay open (from
// the client's view, the server stopped answering).
//
// Chunks are dropped whole, and a reply may come in several chunks or
// share one with the next: a reply that is being read when the mode is
// switched may reach the client in part, which corrupts that connection's
// protocol stream. go-redis then fails that call and closes the
// connection, which is enough for a test of lost replies.
func (p *faultProxy) setDropReplies(on bool) { p.dropReplies.Store(on) }

// setBlackhole turns on or off the black hole: while on, what either side
// sends is read and discarded, so nothing reaches the server and no reply
// reaches a client, and neither side's writes block. Connections stay
// open. Chunks are dropped whole, as for setDropReplies.
func (p *faultProxy) setBlackhole(on bool) { p.blackhole.Store(on) }

// cut closes every open connection at once, on both sides: a call in
// flight on one fails, and the server sees the client go. New connections
// are accepted afterwards as usual.
func (p *faultProxy) cut() {
	for _, c := range p.open() {
		c.close()
	}
}

// setRefuse turns on or off refusal: while on, new connections are
// accepted and closed at once (the client's connect succeeds, and its
// first read sees the end of the stream). Existing connections are not
// affected.
func (p *faultProxy) setRefuse(on bool) { p.refuse.Store(on) }

// halfOpen makes every open connection half-open, like a peer that
// vanished without a FIN or a RST: the proxy stops reading and writing on
// both of its sockets, and keeps them open. A chunk already read but not
// yet written is discarded. The kernel still takes what a side sends until
// the socket buffers are full (several megabytes on loopback), and from
// then on that side's writes block; a side that waits for a reply waits
// until its own timeout. Such a connection stays so until cut or the
// proxy stops, even after the client closes its end. New connections are
// forwarded as usual.
func (p *faultProxy) halfOpen() {
	for _, c := range p.open() {
		c.freeze()
	}
}

// stats returns the counts so far.
func (p *faultProxy) stats() proxyStats {
	return proxyStats{
		accepted: p.accepted.Load(), refused: p.refused.Load(),
		toServer: p.forwarded[toServer].Load(), toClient: p.forwarded[toClient].Load(),
		droppedToServer: p.dropped[toServer].Load(), droppedToClient: p.dropped[toClient].Load(),
		droppedReplies: p.droppedReplies.Load(), delaying: p.delaying.Load(),
	}
}

// open returns the connections open now.
func (p *faultProxy) open() []*proxyConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	return conns
}

// stop closes the listener and every connection, and waits for the
// proxy's goroutines to return.
func (p *faultProxy) stop() {
	p.ln.Close()
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.cut()
	p.cancel()
	p.wg.Wait()
}

func (p *faultProxy) accept() {
	for {
		conn, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // out of file descriptors, say: try again
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.accepted.Add(1)
		if p.refuse.Load() {
			p.refused.Add(1)
			conn.Close()
			continue
		}
		ctx, cancel := context.WithCancel(p.ctx)
		c := &proxyConn{client: conn, ctx: ctx, cancel: cancel}
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			c.close()
			return
		}
		p.conns[c] = struct{}{}
		p.wg.Go(func() { p.serve(c) })
		p.mu.Unlock()
	}
}

// serve dials the server for c and forwards both ways until c is closed.
func (p *faultProxy) serve(c *proxyConn) {
	defer func() {
		c.close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	d := net.Dialer{Timeout: 5 * time.Second}
	server, err := d.DialContext(c.ctx, "tcp", p.target)
	if err != nil || !c.setServer(server) {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(c, toServer, c.client, server) })
	p.pipe(c, toClient, server, c.client)
	wg.Wait()
}

// pipe forwards chunks from src to dst until either fails, and then
// closes c; on a frozen c it stops reading and waits until c is closed.
func (p *faultProxy) pipe(c *proxyConn, dir proxyDirection, src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for !c.frozen.Load() {
		n, err := src.Read(buf)
		if n > 0 && !p.forward(c, dir, dst, buf[:n]) {
			break
		}
		if err != nil {
			break
		}
	}
	if c.frozen.Load() {
		<-c.ctx.Done()
	}
	c.close()
}

// forward writes b, just read, to dst unless a mode discards it; it
// returns false if c is closed or the write failed.
func (p *faultProxy) forward(c *proxyConn, dir proxyDirection, dst net.Conn, b []byte) bool {
	if p.blackhole.Load() || dir == toClient && p.dropReplies.Load() {
		p.dropped[dir].Add(int64(len(b)))
		if dir == toClient {
			p.droppedReplies.Add(1)
		}
		return true
	}
	if d := time.Duration(p.delay.Load()); d > 0 {
		p.delaying.Add(1)
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
			p.delaying.Add(-1)
		case <-c.ctx.Done():
			timer.Stop()
			p.delaying.Add(-1)
			return false
		}
	}
	if c.frozen.Load() {
		p.dropped[dir].Add(int64(len(b)))
		return true
	}
	// Count before writing: the reply to a request may be back at the
	// client before Write returns here.
	p.forwarded[dir].Add(int64(len(b)))
	if n, err := dst.Write(b); err != nil {
		p.forwarded[dir].Add(-int64(len(b) - n))
		return false
	}
	return true
}

// setServer records c's connection to the server; if c was closed
// meanwhile, it closes server and returns false.
func (c *proxyConn) setServer(server net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		server.Close()
		return false
	}
	c.server = server
	if c.frozen.Load() {
		server.SetDeadline(time.Now())
	}
	return true
}

// freeze stops all reads and writes on c: a read or write in progress
// returns at once (its deadline passed), and pipe then waits.
func (c *proxyConn) freeze() {
	c.frozen.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.client.SetDeadline(time.Now())
	if c.server != nil {
		c.server.SetDeadline(time.Now())
	}
}

// close closes both of c's sockets; it may be called more than once.
func (c *proxyConn) close() {
	c.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	c.client.Close()
	if c.server != nil {
		c.server.Close()
	}
}

// proxyClient returns a client of addr with one connection, no retries,
// and the given dial, read and write timeouts. It closes at the test's
// cleanup.
func proxyClient(t testing.TB, addr string, timeout time.Duration) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, PoolSize: 1,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// isTimeout reports whether err is a timeout: a net.Error that says so,
// or context.DeadlineExceeded.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// proxyEventually polls cond every 10ms and fails the test if it does not
// hold within 10s.
func proxyEventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// rawConn is a plain TCP connection through a proxy, to see what a client
// sees below go-redis.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

// ping sends PING and reads one line within d; it returns the line read.
func (c *rawConn) ping(d time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return "", err
	}
	return c.r.ReadString('\n')
}

// mustPing fails the test unless a PING on c is answered within 5s.
func (c *rawConn) mustPing(t testing.TB) {
	t.Helper()
	if line, err := c.ping(5 * time.Second); err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING on a raw connection = %q, %v; want +PONG", line, err)
	}
}

// A delay of 50ms makes a round trip take at least 100ms: the request and
// the reply are each delayed.
func TestFaultProxyDelays(t *testing.T) {
	s := startServer(t)
	p := newFaultProxy(t, s.addr())
	c := proxyClient(t, p.addr(), 5*time.Second) // far above the delay, however loaded the machine
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.setDelay(50 * time.Millisecond)
	start := time.Now()
	err := c.Ping(ctx).Err()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("PING with a 50ms delay: %v", err)
	}
	if took < 100*time.Millisecond {
		t.Errorf("PING with a 50ms delay each way took %v; want at least 100ms", took)
	}
	p.setDelay(0)
	start = time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING with the delay off: %v", err)
	}
	t.Logf("PING took %v with a 50ms delay each way, %v without", took, time.Since(start))
}

// With replies dropped, INCR times out at the caller but the server ran
// it; the connection stays open, and works again once the mode is off.
func TestFaultProxyDropsReplies(t *testing.T) {
	s := startServer(t)
	direct := s.client(t)
	p := newFaultProxy(t, s.addr())
	c := proxyClient(t, p.addr(), 200*time.Millisecond)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.setDropReplies(true)
	if n, err := c.Incr(ctx, "drop:k").Result(); !isTimeout(err) {
		t.Fatalf("INCR with replies dropped = %d, %v; want a timeout", n, err)
	}
	proxyEventually(t, "the server has run the INCR whose reply was lost", func() bool {
		v, err := direct.Get(ctx, "drop:k").Result()
		return err == nil && v == "1"
	})
	// Wait until the proxy has read the lost reply, or it could pass
	// once the mode is off.
	proxyEventually(t, "the reply is dropped", func() bool { return p.stats().droppedReplies > 0 })
	p.setDropReplies(false)
	if n, err := c.Incr(ctx, "drop:k").Result(); err != nil || n != 2 {
		t.Fatalf("INCR with replies flowing again = %d, %v; want 2", n, err)
	}

	// Below go-redis: the connection stays open while replies are lost
	// (a read times out, it does not see the end of the stream), and
	// answers again on the same connection once they flow.
	raw := dialRaw(t, p.addr())
	defer raw.Close()
	raw.mustPing(t)
	p.setDropReplies(true)
	before := p.stats().droppedReplies
	if line, err := raw.ping(300 * time.Millisecond); !isTimeout(err) {
		t.Fatalf("PING on a raw connection with replies dropped = %q, %v; want a timeout", line, err)
	}
	proxyEventually(t, "the PONG is dropped", func() bool { return p.stats().droppedReplies > before })
	p.setDropReplies(false)
	raw.mustPing(t)
	if v, err := direct.Get(ctx, "drop:k").Result(); err != nil || v != "2" {
		t.Errorf("GET drop:k on the server = %q, %v; want 2", v, err)
	}
}

// In a black hole, INCR times out and nothing reaches the server.
func TestFaultProxyBlackholes(t *testing.T) {
	s := startServer(t)
	direct := s.client(t)
	p := newFaultProxy(t, s.addr())
	c := proxyClient(t, p.addr(), 200*time.Millisecond)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.setBlackhole(true)
	before := p.stats()
	if n, err := c.Incr(ctx, "hole:k").Result(); !isTimeout(err) {
		t.Fatalf("INCR in a black hole = %d, %v; want a timeout", n, err)
	}
	// Wait until the proxy has read the INCR, or it could pass once the
	// black hole is off.
	proxyEventually(t, "the INCR is dropped", func() bool { return p.stats().droppedToServer > before.droppedToServer })
	if after := p.stats(); after.toServer != before.toServer {
		t.Errorf("stats before the INCR: %+v, after: %+v; want toServer unchanged", before, after)
	}
	if v, err := direct.Get(ctx, "hole:k").Result(); err != redis.Nil {
		t.Fatalf("GET hole:k on the server after an INCR into a black hole = %q, %v; want nil (no such key)", v, err)
	}
	p.setBlackhole(false)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING with the black hole off: %v", err)
	}
	if v, err := direct.Get(ctx, "hole:k").Result(); err != redis.Nil {
		t.Errorf("GET hole:k on the server = %q, %v; want nil (no such key)", v, err)
	}
}

// cut makes a call in flight fail, the server sees the client go, and the
// next call works on a new connection.
func TestFaultProxyCuts(t *testing.T) {
	s := startServer(t)
	direct := s.client(t)
	p := newFaultProxy(t, s.addr())
	c := proxyClient(t, p.addr(), 200*time.Millisecond)
	ctx := context.Background()
	id, err := c.ClientID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.BLPop(ctx, 10*time.Second, "cut:list").Err() }()
	blocked := func(n string) func() bool {
		return func() bool {
			info, err := direct.Info(ctx, "clients").Result()
			return err == nil && strings.Contains(info, "blocked_clients:"+n+"\r\n")
		}
	}
	proxyEventually(t, "BLPOP blocks on the server", blocked("1"))
	accepted := p.stats().accepted
	p.cut()
	if err := <-done; err == nil || errors.Is(err, redis.Nil) {
		t.Fatalf("BLPOP on a cut connection = %v; want a connection error", err)
	}
	proxyEventually(t, "the server sees the client go", blocked("0"))
	id2, err := c.ClientID(ctx).Result()
	if err != nil {
		t.Fatalf("the call after the cut: %v", err)
	}
	if id2 == id || p.stats().accepted <= accepted {
		t.Errorf("the call after the cut ran on client %d (before: %d), with %d connections accepted (before: %d); want a new connection",
			id2, id, p.stats().accepted, accepted)
	}
}

// While refusing, a new connection fails and an existing one still
// works; afterwards new connections work again.
func TestFaultProxyRefuses(t *testing.T) {
	s := startServer(t)
	p := newFaultProxy(t, s.addr())
	ctx := context.Background()
	old := proxyClient(t, p.addr(), 200*time.Millisecond)
	if err := old.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.setRefuse(true)
	c := proxyClient(t, p.addr(), 200*time.Millisecond)
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING on a new connection while refusing succeeded")
	}
	if st := p.stats(); st.refused == 0 || st.accepted < 2 {
		t.Errorf("stats while refusing: %+v; want a connection accepted and refused", st)
	}
	if err := old.Ping(ctx).Err(); err != nil {
		t.Errorf("PING on an existing connection while refusing: %v", err)
	}
	p.setRefuse(false)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING on a new connection after refusing: %v", err)
	}
}

// After halfOpen, a call times out and nothing reaches the server; the
// connection is not closed, and a client that keeps writing blocks. New
// connections work.
func TestFaultProxyHalfOpens(t *testing.T) {
	s := startServer(t)
	direct := s.client(t)
	p := newFaultProxy(t, s.addr())
	c := proxyClient(t, p.addr(), 200*time.Millisecond)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	raw := dialRaw(t, p.addr())
	defer raw.Close()
	raw.mustPing(t)
	p.halfOpen()
	before := p.stats()
	if n, err := c.Incr(ctx, "half:k").Result(); !isTimeout(err) {
		t.Fatalf("INCR on a half-open connection = %d, %v; want a timeout", n, err)
	}
	if v, err := direct.Get(ctx, "half:k").Result(); err != redis.Nil {
		t.Fatalf("GET half:k on the server after an INCR on a half-open connection = %q, %v; want nil (no such key)", v, err)
	}

	// The raw connection: a read times out (no end of stream), and
	// writes block once the socket buffers are full.
	if line, err := raw.ping(300 * time.Millisecond); !isTimeout(err) {
		t.Fatalf("PING on a half-open raw connection = %q, %v; want a timeout", line, err)
	}
	junk := make([]byte, 1<<20)
	written := 0
	for ; written < 1<<30; written += len(junk) {
		raw.SetWriteDeadline(time.Now().Add(time.Second))
		n, err := raw.Write(junk)
		if err != nil {
			if !isTimeout(err) {
				t.Fatalf("a write on a half-open connection after %d bytes: %v; want a timeout", written+n, err)
			}
			written += n
			break
		}
	}
	if written >= 1<<30 {
		t.Fatal("1GiB was written to a half-open connection without blocking")
	}
	t.Logf("writes on the half-open connection blocked after %d bytes", written)
	if after := p.stats(); after.toServer != before.toServer || after.toClient != before.toClient {
		t.Errorf("stats after halfOpen: %+v, then %+v; want nothing more forwarded", before, after)
	}

	// The go-redis client closed its connection after the timeout, and
	// its next one is forwarded.
	if n, err := c.Incr(ctx, "half:k").Result(); err != nil || n != 1 {
		t.Fatalf("INCR on a new connection after halfOpen = %d, %v; want 1", n, err)
	}
}

// The modes can be switched, and connections cut and frozen, while
// clients use the proxy; with every mode off again, calls work.
func TestFaultProxySwitchesModesWhileInUse(t *testing.T) {
	s := startServer(t)
	p := newFaultProxy(t, s.addr())
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	for range 3 {
		c := proxyClient(t, p.addr(), 50*time.Millisecond)
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if c.Incr(ctx, "switch:k").Err() == nil {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			switch i % 8 {
			case 0:
				p.setDelay(time.Duration(i%3) * time.Millisecond)
			case 1:
				p.setDropReplies(i%32 == 1)
			case 2:
				p.setBlackhole(i%32 == 2)
			case 3:
				p.setRefuse(i%32 == 3)
			case 4:
				if i%16 == 4 {
					p.cut()
				}
			case 5:
				if i%32 == 5 {
					p.halfOpen()
				}
			default:
				_ = p.stats()
			}
		}
	})
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	p.setDelay(0)
	p.setDropReplies(false)
	p.setBlackhole(false)
	p.setRefuse(false)
	p.cut()
	c := proxyClient(t, p.addr(), time.Second)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING with every mode off: %v", err)
	}
	t.Logf("calls while switching: %d answered, %d failed; %+v", ok.Load(), failed.Load(), p.stats())
}

// At cleanup the proxy closes every connection, whatever its state, and
// leaves no goroutine behind.
func TestFaultProxyStopsItsGoroutines(t *testing.T) {
	s := startServer(t)
	before := goleak.IgnoreCurrent()
	var conns []*rawConn
	t.Run("proxy", func(t *testing.T) {
		p := newFaultProxy(t, s.addr())
		dial := func() *rawConn {
			c := dialRaw(t, p.addr())
			conns = append(conns, c)
			c.mustPing(t)
			return c
		}
		// One connection half-open, one idle, one whose reply was dropped,
		// and one with a chunk waiting out a delay the test would not
		// outlive.
		dial()
		p.halfOpen()
		dial()
		dropped := dial()
		p.setDropReplies(true)
		dropped.Write([]byte("PING\r\n"))
		proxyEventually(t, "the PONG is dropped", func() bool { return p.stats().droppedReplies > 0 })
		p.setDropReplies(false)
		delayed := dial()
		p.setDelay(time.Hour)
		delayed.Write([]byte("PING\r\n"))
		proxyEventually(t, "the PING waits out its delay", func() bool { return p.stats().delaying == 1 })
	})
	if err := goleak.Find(before); err != nil {
		t.Error(err)
	}
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.r.ReadByte(); err == nil || isTimeout(err) {
			t.Errorf("connection %d after the proxy stopped: read %v; want the end of the stream", i, err)
		}
		c.Close()
	}
}

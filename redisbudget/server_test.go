package redisbudget_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is a redis-server of the test's own, on a free loopback port, with
// persistence off unless aof is set. It stops at the end of the test.
type server struct {
	t    testing.TB
	path string
	port int
	dir  string
	cmd  *exec.Cmd
	// aof, if set, turns the append-only file on with this appendfsync
	// policy ("always" or "everysec"), in dir: a restart reloads it.
	aof string
}

// startServer starts a server. Without redis-server on PATH it skips the
// test, or fails it under CI=true, where .ci/run installs the package.
func startServer(t *testing.T) *server { return startServerTB(t) }

// startServerTB is startServer for any testing.TB.
func startServerTB(t testing.TB) *server { return startServerAOF(t, "") }

// startServerAOF is startServer with the append-only file on, with
// appendfsync policy fsync ("" for persistence off).
func startServerAOF(t testing.TB, fsync string) *server {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server is not installed, and CI=true: .ci/run must install Debian's redis-server")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server); skipping the Redis tests")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &server{t: t, path: path, port: port, dir: t.TempDir(), aof: fsync}
	s.start()
	t.Cleanup(func() { s.kill() })
	return s
}

func (s *server) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

func (s *server) start() { s.startWith(nil) }

// startWith starts the server listening on a unix socket only, sets the
// keys in preload, and only then opens its TCP port: no client can see the
// server before the keys are there.
func (s *server) startWith(preload map[string]string) {
	s.t.Helper()
	sock := filepath.Join(s.dir, "redis.sock")
	os.Remove(sock)
	persistence := []string{"--appendonly", "no"}
	if s.aof != "" {
		persistence = []string{"--appendonly", "yes", "--appendfsync", s.aof}
	}
	s.cmd = exec.Command(s.path, append([]string{"--port", "0", "--unixsocket", sock, "--unixsocketperm", "700", "--bind", "127.0.0.1",
		"--save", "", "--dir", s.dir, "--daemonize", "no", "--loglevel", "warning"}, persistence...)...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: sock, MaxRetries: -1})
	defer c.Close()
	s.wait(c)
	ctx := context.Background()
	for k, v := range preload {
		if err := c.Set(ctx, k, v, 0).Err(); err != nil {
			s.t.Fatalf("preloading %s: %v", k, err)
		}
	}
	if err := c.ConfigSet(ctx, "port", fmt.Sprint(s.port)).Err(); err != nil {
		s.t.Fatalf("opening port %d: %v", s.port, err)
	}
	tcp := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
	defer tcp.Close()
	s.wait(tcp)
}

func (s *server) wait(c *redis.Client) {
	for deadline := time.Now().Add(10 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer: %v", s.addr(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *server) pause()  { s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *server) resume() { s.cmd.Process.Signal(syscall.SIGCONT) }

// kill ends the server at once, losing its data.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// client returns a client with its own pool and no retries of its own.
func (s *server) client(t *testing.T) *redis.Client { return s.clientTB(t) }

func (s *server) clientTB(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: s.addr(), MaxRetries: -1, PoolSize: 4,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond,
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// quiet drops go-redis's own log lines (a dial that failed, a pool that
// redials), which the fault tests cause by the hundred; the errors the
// budgets return carry the causes the tests check.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quiet{}) }

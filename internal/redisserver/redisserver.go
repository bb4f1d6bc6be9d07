// Package redisserver starts a redis-server of a test's own, on a free
// loopback port, for the tests of the modules that keep budgets in Redis
// (otelbudget's, and the fleet tests in testdata/fleet). It uses the
// standard library only, so that the root module does not require a Redis
// client; redisbudget's own tests, which pause, preload and restart their
// servers, have a richer helper of their own.
package redisserver

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is a running redis-server, without persistence. The test's end
// kills it.
type Server struct {
	Addr string // host:port on 127.0.0.1
	cmd  *exec.Cmd
}

// Start starts a Server and waits until it answers PING. Without
// redis-server on PATH it skips the test, or fails it under CI=true, where
// .ci/run installs Debian's package.
func Start(t testing.TB) *Server {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed, and CI=true: .ci/run must install Debian's redis-server")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	s.cmd = exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(), "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(s.Kill)
	var last error
	for deadline := time.Now().Add(10 * time.Second); ; {
		if last = ping(s.Addr); last == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer: %v", s.Addr, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Kill ends the server at once. It may be called more than once.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

// ping sends PING in the inline form of the Redis protocol and wants +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

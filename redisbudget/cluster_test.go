package redisbudget_test

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/redisbudget"
)

var clusterScenarios = flag.Int("redis.cluster.scenarios", 2, "scenarios per fault kind in TestCluster (the acceptance level is 50)")

var masterKill = flag.Bool("redis.masterkill", false, "run TestCluster's killed-master scenarios too (some are too hard for the checker: inconclusive)")

// A clusterNode is one redis-server of a test cluster, on a free loopback
// port, with persistence off.
type clusterNode struct {
	t    testing.TB
	path string
	port int
	bus  int
	dir  string
	cmd  *exec.Cmd
}

func (n *clusterNode) addr() string { return fmt.Sprintf("127.0.0.1:%d", n.port) }

// start starts the node; a node that ran before rejoins the cluster from
// its nodes.conf.
func (n *clusterNode) start() {
	n.t.Helper()
	n.cmd = exec.Command(n.path, "--port", fmt.Sprint(n.port), "--cluster-port", fmt.Sprint(n.bus), "--bind", "127.0.0.1",
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000",
		"--save", "", "--appendonly", "no", "--dir", n.dir, "--daemonize", "no", "--loglevel", "warning")
	if err := n.cmd.Start(); err != nil {
		n.t.Fatalf("starting redis-server: %v", err)
	}
	c := n.client()
	defer c.Close()
	until(n.t, 10*time.Second, "node "+n.addr()+" answers", func() bool { return c.Ping(context.Background()).Err() == nil })
}

// kill ends the node at once, losing its data.
func (n *clusterNode) kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGCONT)
	n.cmd.Process.Kill()
	n.cmd.Wait()
	n.cmd = nil
}

// client returns a client of this node alone.
func (n *clusterNode) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
}

// role returns "master" or "slave", or "" if the node does not answer.
func (n *clusterNode) role() string {
	c := n.client()
	defer c.Close()
	v, err := c.Do(context.Background(), "ROLE").Slice()
	if err != nil || len(v) == 0 {
		return ""
	}
	s, _ := v[0].(string)
	return s
}

// A testCluster is a Redis Cluster of 3 masters, each with one replica, on
// loopback, stopped at the end of the test.
type testCluster struct {
	t     testing.TB
	nodes []*clusterNode
}

// startCluster starts a cluster, or skips the test (fails it under
// CI=true) without redis-server and redis-cli.
func startCluster(t testing.TB) *testCluster {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	cli, cliErr := exec.LookPath("redis-cli")
	if err != nil || cliErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server or redis-cli is not installed, and CI=true: .ci/run must install Debian's redis-server and redis-tools")
		}
		t.Skip("redis-server or redis-cli is not installed (apt-get install redis-server redis-tools); skipping the cluster tests")
	}
	ports := freePorts(t, 12)
	c := &testCluster{t: t}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.kill()
		}
	})
	addrs := make([]string, 6)
	for i := range 6 {
		n := &clusterNode{t: t, path: path, port: ports[2*i], bus: ports[2*i+1], dir: t.TempDir()}
		n.start()
		c.nodes = append(c.nodes, n)
		addrs[i] = n.addr()
	}
	out, err := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "1", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitHealthy(t)
	return c
}

// freePorts returns n distinct free loopback ports.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// waitHealthy waits until every node says the cluster is ok, and every
// master has one replica in sync.
func (c *testCluster) waitHealthy(t testing.TB) {
	t.Helper()
	until(t, 30*time.Second, "the cluster is ok with 3 masters in sync with their replicas", func() bool {
		masters := 0
		for _, n := range c.nodes {
			cl := n.client()
			info, err := cl.ClusterInfo(context.Background()).Result()
			repl, err2 := cl.Info(context.Background(), "replication").Result()
			shards, err3 := cl.ClusterShards(context.Background()).Result()
			cl.Close()
			if err != nil || err2 != nil || err3 != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
			for _, sh := range shards {
				if len(sh.Slots) > 0 && len(sh.Nodes) != 2 {
					return false // a replica not yet known to this node
				}
				for _, n := range sh.Nodes {
					if n.Health != "online" {
						return false
					}
				}
			}
			if strings.Contains(repl, "role:master") {
				if !strings.Contains(repl, "connected_slaves:1") || !strings.Contains(repl, "state=online") {
					return false
				}
				masters++
			}
		}
		return masters == 3
	})
}

// client returns a cluster client with its own pools that resends
// nothing: no retries, no redirects.
func (c *testCluster) client(t testing.TB) *redis.ClusterClient {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.addr()
	}
	cl := redis.NewClusterClient(&redis.ClusterOptions{
		// go-redis reloads the topology on MOVED, but not when a master
		// is gone, until ClusterStateReloadInterval (60s by default).
		Addrs: addrs, MaxRedirects: -1, PoolSize: 4, ClusterStateReloadInterval: 500 * time.Millisecond,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond,
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { cl.Close() })
	return cl
}

// owners returns the master and the replica that hold key's slot.
func (c *testCluster) owners(t testing.TB, key string) (master, replica *clusterNode) {
	t.Helper()
	cl := c.nodes[0].client()
	defer cl.Close()
	ctx := context.Background()
	slot, err := cl.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	shards, err := cl.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	byPort := map[int64]*clusterNode{}
	for _, n := range c.nodes {
		byPort[int64(n.port)] = n
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start <= slot && slot <= r.End && len(sh.Nodes) == 2 {
				for _, n := range sh.Nodes {
					if n.Role == "master" {
						master = byPort[n.Port]
					} else {
						replica = byPort[n.Port]
					}
				}
				if master != nil && replica != nil {
					return master, replica
				}
			}
		}
	}
	t.Fatalf("no master with one replica holds slot %d: %+v", slot, shards)
	return nil, nil
}

// eventually polls cond every 20ms for at most d, and reports whether it
// came to hold.
func eventually(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// until polls cond every 20ms and fails the test if it does not hold
// within d.
func until(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !eventually(d, cond) {
		t.Fatalf("timed out after %v waiting until %s", d, what)
	}
}

// clusterRig is a rig on c, for a budget of a fresh name whose clock key
// carries the budget's hash tag.
func clusterRig(t testing.TB, c *testCluster) rig {
	name := fresh("cl")
	clockKey := "retrybudget:{" + name + "}:clock"
	return rig{
		client: func() redis.UniversalClient { return c.client(t) },
		admin:  c.client(t),
		healthy: func(cl redis.UniversalClient) {
			// The first call after a failover fails with MOVED, which
			// makes the client load the new topology. The probe is a
			// write: a master handing over its slots pauses writes only.
			for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				err := cl.Incr(ctx, "retrybudget:{"+name+"}:probe").Err()
				cancel()
				if err == nil {
					return
				}
			}
		},
		name: name, clockKey: clockKey,
	}
}

// TestCluster checks histories of 4 clients × 100 calls
// on a budget in a 3-master cluster with replicas, through a failover of
// the master of the budget's slot:
//
//   - "failover": CLUSTER FAILOVER on the replica, the coordinated handover
//     an operator or an upgrade makes. The master stops taking writes, the
//     replica catches up and takes over; nothing is lost. The calls that
//     fail meanwhile are pending.
//   - "masterkill": the master is killed (SIGKILL) and the cluster promotes
//     the replica by itself, after the node timeout (1s). Replication is
//     asynchronous, so the writes the replica had not received are lost.
//     The history says so honestly: just before the kill the fault writes a
//     fence and waits for the replica to have it (WAIT), so every call that
//     returned before the fence is on the replica; every call that
//     returned after it and was made before the kill is recorded as
//     pending, its answer not trusted, as the calls that failed are. A
//     pending call made before the kill went to the dead master, so it
//     took effect before the kill or never: it is settled by the kill.
//     These scenarios run only with -redis.masterkill: the checker cannot
//     decide about 1 in 25 of them within its minute, which is
//     inconclusive, and a gate must not fail on correct code.
//
// The cluster also shows that a budget's keys share one slot. Run with
// -redis.cluster.scenarios=50 for the acceptance level.
func TestCluster(t *testing.T) {
	t.Parallel() // it mostly waits, for the cluster to form and to fail over
	c := startCluster(t)
	t.Run("keys share a slot", func(t *testing.T) { keysShareASlot(t, c) })
	for _, fault := range []string{"failover", "masterkill"} {
		t.Run(fault, func(t *testing.T) {
			n := *clusterScenarios
			if fault == "masterkill" && !*masterKill {
				// About 1 scenario in 25 is too hard for the checker within
				// its minute (inconclusive, never a pass), so a gate that
				// ran it would fail now and then on correct code.
				t.Skip("the killed-master scenarios run with -redis.masterkill")
			}
			var fastest, slowest time.Duration
			checkScenarios(t, fault, n, func(sc linearizability.Scenario, newClient func(redisbudget.Config) (netBudget, error)) model.History {
				rg := clusterRig(t, c)
				rg.hold = true
				// A call made after the master was killed that failed on
				// a connection to it (refused, reset) cannot have run.
				var deadAddr string
				var deadAt atomic.Int64
				rg.noEffect = func(call int64, err error) bool {
					at := deadAt.Load()
					return at > 0 && call > at && strings.Contains(err.Error(), deadAddr)
				}
				var promotedAt int64
				master, replica := c.owners(t, rg.clockKey)
				h := record(t, rg, sc, func(r *recording) {
					t0 := time.Now()
					switch fault {
					case "failover":
						// A manual failover that the master does not join in
						// time is called off (after 5s); an operator tries again.
						rc := replica.client()
						defer rc.Close()
						for try := 1; ; try++ {
							if err := rc.Do(context.Background(), "CLUSTER", "FAILOVER").Err(); err != nil {
								t.Errorf("CLUSTER FAILOVER: %v", err)
								return
							}
							if eventually(8*time.Second, func() bool { return replica.role() == "master" }) {
								break
							}
							if try == 3 {
								t.Errorf("3 CLUSTER FAILOVERs on %s did not make it a master", replica.addr())
								return
							}
						}
					case "masterkill":
						mc := redis.NewClient(&redis.Options{Addr: master.addr(), MaxRetries: -1, ReadTimeout: 5 * time.Second, PoolSize: 1})
						mc.Ping(context.Background()) // dialled before the fence, to keep the unsure window short
						from := r.now()
						var wait *redis.Cmd
						_, err := mc.Pipelined(context.Background(), func(p redis.Pipeliner) error {
							p.Incr(context.Background(), "retrybudget:{"+rg.name+"}:fence")
							wait = p.Do(context.Background(), "WAIT", 1, 2000)
							return nil
						})
						mc.Close()
						if n, _ := wait.Int(); err != nil || n != 1 {
							// The replica may lack any write: trust nothing before the kill.
							t.Logf("the fence did not reach the replica (%v, %d): every call before the kill is unsure", err, n)
							from = 0
						}
						deadAddr = master.addr()
						master.kill()
						killed := r.now()
						deadAt.Store(killed)
						r.lost(from, killed)
						r.killed(killed)
					}
					// Not until: a fault runs on a goroutine of its own, where
					// the test may not stop.
					if !eventually(20*time.Second, func() bool { return replica.role() == "master" }) {
						t.Errorf("the replica %s was not a master 20s after the fault", replica.addr())
						return
					}
					d := time.Since(t0)
					if fastest == 0 || d < fastest {
						fastest = d
					}
					slowest = max(slowest, d)
					promotedAt = r.now()
				}, newClient)
				if fault == "masterkill" {
					master.start() // it rejoins as the new master's replica
				}
				c.waitHealthy(t)
				if answeredAfter(h, len(sc.Goroutines), promotedAt) == 0 {
					t.Errorf("no call was answered after the replica took over: the failover did not happen mid-run")
				}
				return h
			})
			t.Logf("fault %q: from the fault to a new master took %v to %v", fault, fastest.Round(time.Millisecond), slowest.Round(time.Millisecond))
		})
	}
}

// keysShareASlot shows that a budget's keys, its clock key included, share
// one hash slot, so that each call's script runs on one node, and that the
// budgets work on a cluster.
func keysShareASlot(t *testing.T, c *testCluster) {
	cl := c.client(t)
	ctx := context.Background()
	name := fresh("slot")
	keys := []string{"retrybudget:{" + name + "}:tb", "retrybudget:{" + name + "}:ratio", "retrybudget:{" + name + "}:clock"}
	var slots []int64
	for _, k := range keys {
		s, err := cl.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots = append(slots, s)
	}
	if slots[0] != slots[1] || slots[0] != slots[2] {
		t.Errorf("slots %v of %v: want one slot", slots, keys)
	}
	if err := cl.Set(ctx, keys[2], 0, 0).Err(); err != nil {
		t.Fatal(err)
	}
	cfg := redisbudget.Config{Client: cl, Name: name, ClockKey: keys[2], CallTimeout: time.Second}
	tb, err := redisbudget.NewTokenBucket(cfg, budget.TokenBucketConfig{Capacity: 10, TransientCost: 5, ThrottledCost: 5})
	if err != nil {
		t.Fatal(err)
	}
	ra, err := redisbudget.NewRatio(cfg, budget.RatioConfig{Ratio: 0.1, Window: 10 * time.Second, Slots: 10, Floor: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false} {
		if ok, err := tb.RetryContext(ctx, budget.Transient); ok != want || err != nil {
			t.Errorf("token bucket of 2 retries, retry %d: %v, %v; want %v", i+1, ok, err, want)
		}
	}
	for i, want := range []bool{true, false} {
		if ok, err := ra.RetryContext(ctx, budget.Transient); ok != want || err != nil {
			t.Errorf("ratio with a floor of 1, retry %d: %v, %v; want %v", i+1, ok, err, want)
		}
	}
}

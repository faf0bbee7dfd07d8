package testutil

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// nodeToken is the node token of the clusters tests start.
const nodeToken = "test-cluster-node-token-0123456789abcdef"

// Cluster is a cluster the test started from bin/cove: API replicas and
// nodes on loopback over one PostgreSQL database.
type Cluster struct {
	APIs  []Server // the replicas (their DataDir holds no sandboxes)
	Nodes []Server // the nodes (URL: their node API)
}

// StartCluster runs replicas `cove api` and nodes `cove node` (extra:
// the nodes' flags) on the database dsn; all stop (SIGINT) when the test
// ends, every user's sandbox killed first, and a node that left any is an
// error.
func StartCluster(t *testing.T, apiKey, dsn string, replicas, nodes int, extra ...string) Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cove node needs root")
	}
	var c Cluster
	for i := range nodes {
		name := fmt.Sprintf("n%d", i+1)
		c.Nodes = append(c.Nodes, startRole(t, "node", append([]string{"--database", dsn, "--node-token", nodeToken, "--name", name,
			"--cgroup-parent", "cove-test-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(int(serverSeq.Add(1))), "--network=false"}, extra...)))
	}
	waitForNodes(t, dsn, nodes)
	for range replicas {
		c.APIs = append(c.APIs, startRole(t, "api", []string{"--database", dsn, "--node-token", nodeToken, "--api-key", apiKey}))
	}
	t.Cleanup(func() { killAll(c.APIs[0].URL, apiKey) }) // runs before the roles stop
	return c
}

// waitForNodes waits until n nodes reported themselves in the database.
func waitForNodes(t *testing.T, dsn string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for {
		var have int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM nodes`).Scan(&have)
		if err == nil && have >= n {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d nodes reported themselves: %v", have, n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startRole runs bin/cove role with args on a free loopback port and its
// own data directory, stopped (SIGINT) when the test ends; its log is
// shown if the test failed.
func startRole(t *testing.T, role string, args []string) Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := Server{Addr: addr, URL: "http://" + addr, DataDir: t.TempDir()}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, Binary(t), append([]string{role, "--listen", addr, "--data-dir", s.DataDir}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if left := allOf(s.DataDir); len(left) > 0 {
			t.Errorf("left on disk after cove %s stopped: %v", role, left)
		}
		logs.mu.Lock()
		log := logs.b.String()
		logs.mu.Unlock()
		CheckLog(t, log)
	})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return s
		}
	}
	t.Fatalf("cove %s did not listen on %s", role, addr)
	return s
}

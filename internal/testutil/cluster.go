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
	procs []*role  // the nodes' processes
}

// role is a running cove process of a cluster.
type role struct {
	name string
	args []string
	env  []string // beside this process's
	cmd  *exec.Cmd
}

// KillNode ends node i's process with SIGKILL, as a host failing would:
// its sandboxes keep running, nothing of it says goodbye.
func (c Cluster) KillNode(t *testing.T, i int) {
	t.Helper()
	if err := c.procs[i].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.procs[i].cmd.Wait()
}

// RestartNode starts node i again, on its address and data directory.
func (c Cluster) RestartNode(t *testing.T, i int) {
	t.Helper()
	n := c.Nodes[i]
	c.procs[i] = startProc(t, c.procs[i].name, n, c.procs[i].args, c.procs[i].env)
}

// StartCluster runs replicas `cove api` and nodes `cove node` (extra:
// the nodes' flags) on the database dsn, sharing a bucket of the test
// binary's S3 server; all stop (SIGINT) when the test
// ends, every user's sandbox killed first, and a node that left any is an
// error.
func StartCluster(t *testing.T, apiKey, dsn string, replicas, nodes int, extra ...string) Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cove node needs root")
	}
	var c Cluster
	bucket, creds := ObjectStore(t)
	env := []string{"COVE_OBJECT_STORE=" + bucket, "AWS_ACCESS_KEY_ID=" + creds.AccessKey, "AWS_SECRET_ACCESS_KEY=" + creds.SecretKey}
	for i := range nodes {
		name := fmt.Sprintf("n%d", i+1)
		args := append([]string{"node", "--database", dsn, "--node-token", nodeToken, "--name", name,
			"--cgroup-parent", "cove-test-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(int(serverSeq.Add(1))), "--network=false"}, extra...)
		s, r := startRole(t, args, env)
		c.Nodes, c.procs = append(c.Nodes, s), append(c.procs, r)
	}
	waitForNodes(t, dsn, nodes)
	for range replicas {
		s, _ := startRole(t, []string{"api", "--database", dsn, "--node-token", nodeToken, "--api-key", apiKey}, env)
		c.APIs = append(c.APIs, s)
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

// startRole runs bin/cove with args (the role first) on a free loopback
// port and its own data directory, stopped (SIGINT) when the test ends,
// when it left nothing behind.
func startRole(t *testing.T, args, env []string) (Server, *role) {
	t.Helper()
	s := newServer(t)
	t.Cleanup(func() { // after the process stopped (cleanups run last first)
		if left := allOf(s.DataDir); len(left) > 0 {
			t.Errorf("left on disk after cove %s stopped: %v", args[0], left)
		}
	})
	return s, startProc(t, args[0], s, args, env)
}

// startProc runs bin/cove args (with env beside this process's) on s's
// address and data directory until the test ends (SIGINT then), and waits
// until it listens.
func startProc(t *testing.T, name string, s Server, args, env []string) *role {
	t.Helper()
	logs := &lockedBuffer{}
	cmd := launch(t, Binary(t), name, s, append(append([]string{}, args...), "--listen", s.Addr, "--data-dir", s.DataDir), env, logs)
	r := &role{name: name, args: args, env: env, cmd: cmd}
	t.Cleanup(func() {
		if cmd.ProcessState == nil { // not killed by the test
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
		}
		logs.mu.Lock()
		log := logs.b.String()
		logs.mu.Unlock()
		CheckLog(t, log)
	})
	return r
}

// launch starts bin with args (and env beside this process's), its
// output into logs, and waits until s's address listens.
func launch(t *testing.T, bin, name string, s Server, args, env []string, logs *lockedBuffer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", s.Addr); err == nil {
			c.Close()
			return cmd
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	t.Fatalf("cove %s did not listen on %s", name, s.Addr)
	return cmd
}

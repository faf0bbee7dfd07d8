package testutil

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
	all   []*role  // every process: the nodes', then the replicas'
}

// role is a running cove process of a cluster.
type role struct {
	srv  Server
	args []string // the role first
	env  []string // beside this process's
	cmd  *exec.Cmd
	logs *lockedBuffer
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

// KillAPI ends API replica i's process with SIGKILL, as a host failing
// would.
func (c Cluster) KillAPI(t *testing.T, i int) {
	t.Helper()
	r := c.all[len(c.procs)+i]
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = r.cmd.Wait()
}

// StopNode ends node i's process cleanly (SIGINT): its sandboxes keep
// running, for its next start to adopt.
func (c Cluster) StopNode(t *testing.T, i int) {
	t.Helper()
	if err := c.procs[i].cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	_ = c.procs[i].cmd.Wait()
}

// RestartNode starts node i again, on its address and data directory.
func (c Cluster) RestartNode(t *testing.T, i int) {
	t.Helper()
	c.procs[i].start(t)
}

// Shutdown kills every sandbox of apiKey and stops every process (SIGINT),
// before the test ends: what its end does, for a test that runs clusters
// one after the other.
func (c Cluster) Shutdown(apiKey string) {
	killAll(c.APIs[0].URL, apiKey)
	for _, r := range c.all {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Signal(os.Interrupt)
			_ = r.cmd.Wait()
		}
	}
}

// Quiet keeps the cluster's logs from being shown when the test fails.
func (c Cluster) Quiet() {
	for _, r := range c.all {
		r.logs.quiet = true
	}
}

// Log is what the cluster's processes wrote so far, each under its name.
func (c Cluster) Log() string {
	var b strings.Builder
	for _, r := range c.all {
		fmt.Fprintf(&b, "--- cove %s on %s\n%s", r.args[0], r.srv.Addr, r.logs.String())
	}
	return b.String()
}

// Leaks lists what the cluster's stopped nodes left on the host: mounts
// under their data directories, groups under their cgroup parents.
func (c Cluster) Leaks() []string {
	var out []string
	for _, r := range c.procs {
		out = append(out, leaksOf(r.srv.DataDir, r.args)...)
	}
	return out
}

// Leftovers lists what the cluster's nodes still hold of users' sandboxes.
func (c Cluster) Leftovers() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, Leftovers(n.DataDir)...)
	}
	return out
}

// StartCluster runs replicas `cove api` and nodes `cove node` (extra:
// the nodes' flags) on the database dsn, sharing a bucket of the test
// binary's S3 server; all stop (SIGINT) when the test
// ends, every user's sandbox killed first, and a node that left any is an
// error.
func StartCluster(t *testing.T, apiKey, dsn string, replicas, nodes int, extra ...string) Cluster {
	t.Helper()
	return StartClusterWith(t, ClusterConfig{APIKey: apiKey, DSN: dsn, Replicas: replicas, Nodes: nodes,
		NodeArgs: func(int) []string { return extra }})
}

// ClusterConfig is what StartClusterWith starts.
type ClusterConfig struct {
	APIKey, DSN     string
	Replicas, Nodes int
	// NodeArgs, when set, gives node i (from 0) its flags beyond the
	// cluster's; APIArgs are every replica's.
	NodeArgs func(i int) []string
	APIArgs  []string
}

// StartClusterWith starts the cluster cfg describes, as StartCluster does.
// Its roles serve the host's template as base unless their flags say
// otherwise.
func StartClusterWith(t *testing.T, cfg ClusterConfig) Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cove node needs root")
	}
	var c Cluster
	bucket, creds := ObjectStore(t)
	env := []string{"COVE_OBJECT_STORE=" + bucket, "AWS_ACCESS_KEY_ID=" + creds.AccessKey, "AWS_SECRET_ACCESS_KEY=" + creds.SecretKey}
	for i := range cfg.Nodes {
		name := fmt.Sprintf("n%d", i+1)
		args := []string{"node", "--database", cfg.DSN, "--node-token", nodeToken, "--name", name,
			"--cgroup-parent", "cove-test-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(int(serverSeq.Add(1))), "--network=false", "--base=host"}
		if cfg.NodeArgs != nil {
			args = append(args, cfg.NodeArgs(i)...)
		}
		s, r := startRole(t, args, env)
		c.Nodes, c.procs, c.all = append(c.Nodes, s), append(c.procs, r), append(c.all, r)
	}
	waitForNodes(t, cfg.DSN, cfg.Nodes)
	for range cfg.Replicas {
		args := append([]string{"api", "--database", cfg.DSN, "--node-token", nodeToken, "--api-key", cfg.APIKey, "--base=host"}, cfg.APIArgs...)
		s, r := startRole(t, args, env)
		c.APIs, c.all = append(c.APIs, s), append(c.all, r)
	}
	t.Cleanup(func() { killAll(c.APIs[0].URL, cfg.APIKey) }) // runs before the roles stop
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
	r := &role{srv: s, args: args, env: env, logs: &lockedBuffer{}}
	r.start(t)
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil { // not stopped by the test
			_ = r.cmd.Process.Signal(os.Interrupt)
			_ = r.cmd.Wait()
		}
		r.logs.check(t)
	})
	return s, r
}

// start runs bin/cove with the role's args (and env beside this
// process's) on its address and data directory, its output added to its
// log, and waits until it listens.
func (r *role) start(t *testing.T) {
	t.Helper()
	r.cmd = launch(t, Binary(t), r.args[0], r.srv, append(append([]string{}, r.args...), "--listen", r.srv.Addr, "--data-dir", r.srv.DataDir), r.env, r.logs)
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

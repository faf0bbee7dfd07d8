package server_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil"
)

// TestClusterPausedMoves: a paused sandbox outlives its node. Paused
// without its memory, its files go to the object store; paused with it, a
// copy of its files does too. Its node lost, it stays listed and paused,
// on no node (a pause is 409, as paused); a connect through either
// replica boots it on another node with its files and the same token
// (one paused with its memory boots afresh); one killed while on no node
// is gone; the lost node back drops its own copies; kills then leave
// nothing anywhere. The second replica hears of the loss late (its lease
// is long): what it kept of the lost node's sandboxes is stale while the
// first moves them, and it still finds them.
func TestClusterPausedMoves(t *testing.T) {
	c := startShared(t, func(cfg *server.Config) {
		if cfg.NodeName == "api2" {
			cfg.NodeLease = time.Hour
		}
	})
	apis, st, ctx := c.apis, c.st, c.ctx
	nodeOf := func(id string) string {
		t.Helper()
		sb, err := st.Sandbox(ctx, id)
		if err != nil {
			t.Fatalf("the record of %s: %v", id, err)
		}
		return sb.Node
	}
	// Five sandboxes on two nodes: one node has three.
	tokens := map[string]string{}
	on := map[string][]string{}
	for i := range 5 {
		code, m, raw := apis[i%2].do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120,"secure":true}`)
		if code != 201 {
			t.Fatalf("create: %d %s", code, raw)
		}
		id := m["sandboxID"].(string)
		tokens[id] = m["envdAccessToken"].(string)
		if out, err := run(ctx, apis[1].url, id, tokens[id], "echo kept-"+id+" > ~/state; sleep 600 > /dev/null 2>&1 &"); err != nil {
			t.Fatalf("write: %q %v", out, err)
		}
		n := nodeOf(id)
		on[n] = append(on[n], id)
	}
	lost, other := "n1", "n2"
	if len(on[lost]) < 3 {
		lost, other = other, lost
	}
	moved, memory, killed, stays := on[lost][0], on[lost][1], on[lost][2], on[other][0]
	for id, body := range map[string]string{moved: `{"memory":false}`, memory: `{}`, killed: `{"memory":false}`, stays: `{"memory":false}`} {
		if code, _, raw := apis[0].do(t, "POST", "/sandboxes/"+id+"/pause", keyA, body); code != 204 {
			t.Fatalf("pause %s: %d %s", body, code, raw)
		}
		if state, err := st.PausedState(ctx, id); err != nil || len(state) == 0 {
			t.Fatalf("no paused state recorded for a pause %s: %v", body, err)
		}
	}

	c.roles[lost].stop()
	stopped := time.Now()
	for nodeOf(moved) != "" || nodeOf(memory) != "" || nodeOf(killed) != "" {
		if time.Since(stopped) > 15*time.Second {
			t.Fatalf("the paused sandboxes are still recorded on their lost node %s 15 s after it stopped", lost)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, a := range apis {
		if code, m, raw := a.do(t, "GET", "/sandboxes/"+moved, keyA, ""); code != 200 || m["state"] != "paused" {
			t.Errorf("its node lost, the paused sandbox through %s: %d %s", a.url, code, raw)
		}
	}
	if code, _, raw := apis[0].do(t, "GET", "/v2/sandboxes?state=paused", keyA, ""); code != 200 || len(ids(t, raw)) != 4 {
		t.Errorf("its node lost, the paused sandboxes are not all listed: %d %s", code, raw)
	}
	if code, _, raw := apis[0].do(t, "POST", "/sandboxes/"+moved+"/pause", keyA, `{}`); code != 409 {
		t.Errorf("a pause with its node lost: %d %s, want 409", code, raw)
	}
	if code, m, raw := apis[1].do(t, "POST", "/sandboxes/"+moved+"/connect", keyA, `{"timeout":60}`); code != 201 || m["sandboxID"] != moved {
		t.Fatalf("connect with its node lost: %d %s", code, raw)
	}
	if n := nodeOf(moved); n != other {
		t.Errorf("resumed on %q, want %s", n, other)
	}
	if out, err := run(ctx, apis[0].url, moved, tokens[moved], "cat ~/state"); err != nil || out != "kept-"+moved+"\n" {
		t.Errorf("its files on the other node: %q %v", out, err)
	}
	if state, err := st.PausedState(ctx, moved); err != nil || len(state) != 0 {
		t.Errorf("a paused state kept after the resume: %d bytes, %v", len(state), err)
	}
	// Paused with its memory: its files move, its processes start afresh.
	if code, _, raw := apis[0].do(t, "POST", "/sandboxes/"+memory+"/resume", keyA, `{"timeout":60}`); code != 201 {
		t.Fatalf("resume of one paused with its memory, its node lost: %d %s", code, raw)
	}
	if out, err := run(ctx, apis[1].url, memory, tokens[memory], "cat ~/state; pgrep -c sleep || true"); err != nil || out != "kept-"+memory+"\n0\n" {
		t.Errorf("one paused with its memory, on the other node: %q %v, want its file and no sleep", out, err)
	}
	if code, _, raw := apis[0].do(t, "DELETE", "/sandboxes/"+killed, keyA, ""); code != 204 {
		t.Errorf("kill on no node: %d %s", code, raw)
	}
	if code, _, _ := apis[1].do(t, "GET", "/sandboxes/"+killed, keyA, ""); code != 404 {
		t.Errorf("killed on no node, then: %d, want 404", code)
	}
	// The lost node back: its copies go, the others run on or stay paused.
	back := startRole(t, false, lost, c.dsn, c.nodes[lost], "", c.opts...)
	if left := testutil.Leftovers(back.dataDir); len(left) > 0 {
		t.Errorf("the node back kept sandboxes the cluster moved or killed: %v", left)
	}
	if out, err := run(ctx, apis[1].url, moved, tokens[moved], "echo still"); err != nil || out != "still\n" {
		t.Errorf("after its old node came back: %q %v", out, err)
	}
	if code, m, raw := apis[1].do(t, "GET", "/sandboxes/"+stays, keyA, ""); code != 200 || m["state"] != "paused" || nodeOf(stays) != other {
		t.Errorf("the paused sandbox of the node that stayed: %d %s", code, raw)
	}
	for _, id := range append([]string{moved, memory}, on[other]...) { // (a 4th on the lost node ran: it is gone)
		if code, _, raw := apis[0].do(t, "DELETE", "/sandboxes/"+id, keyA, ""); code != 204 {
			t.Errorf("kill: %d %s", code, raw)
		}
	}
	for _, dir := range []string{back.dataDir, c.nodes[other]} {
		if left := testutil.Leftovers(dir); len(left) > 0 {
			t.Errorf("left on a node: %v", left)
		}
	}
}

// ids are the sandbox ids of a listing.
func ids(t *testing.T, raw []byte) []string {
	t.Helper()
	var list []struct {
		SandboxID string `json:"sandboxID"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("a listing: %v: %s", err, raw)
	}
	var out []string
	for _, s := range list {
		out = append(out, s.SandboxID)
	}
	return out
}

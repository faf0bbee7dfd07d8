package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store/postgres"
	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestClusterVolumes: a cluster's volume lives on one node. Made through
// one replica and read and written through the other; a sandbox that
// mounts it is placed on its node and shares its files with the content
// API; volumes of two nodes in one sandbox are refused; the node's own
// content route wants the node token; with its node gone the volume is
// kept but unavailable (503), and deleted meanwhile, its files go when
// the node is back; a delete with the node up removes them at once.
func TestClusterVolumes(t *testing.T) {
	t.Cleanup(server.SetNodeSweep(5*time.Minute, 0)) // undone once the roles stopped
	dsn := testutil.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes := map[string]role{}
	for _, name := range []string{"n1", "n2"} {
		nodes[name] = startRole(t, false, name, dsn, "", "")
	}
	var apis []srv
	for i := range 2 {
		r := startRole(t, true, fmt.Sprintf("api%d", i+1), dsn, "", "")
		apis = append(apis, srv{url: r.url, dataDir: r.dataDir})
	}
	defer apis[1].killAll(t) // what a failed test left
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	content := func(a srv, method, id, token, path, body string) (int, string) {
		t.Helper()
		return volumeContent(t, a.url, method, id, token, path, body)
	}
	makeVolume := func(a srv, name string) (id, token, node string) {
		t.Helper()
		code, m, raw := a.do(t, "POST", "/volumes", keyA, `{"name":"`+name+`"}`)
		if code != 201 {
			t.Fatalf("create volume %s: %d %s", name, code, raw)
		}
		id, token = m["volumeID"].(string), m["token"].(string)
		v, err := st.VolumeByID(ctx, id)
		if err != nil || nodes[v.Node].url == "" {
			t.Fatalf("volume %s's record: %+v %v", name, v, err)
		}
		return id, token, v.Node
	}

	id, token, on := makeVolume(apis[0], "data")
	if code, _, raw := apis[1].do(t, "POST", "/volumes", keyA, `{"name":"data"}`); code != 409 {
		t.Errorf("the same name through the other replica: %d %s", code, raw)
	}
	if code, body := content(apis[1], "PUT", id, token, "/file?path=/seed.txt", "from the API"); code != 201 {
		t.Fatalf("write through the other replica: %d %s", code, body)
	}
	if code, _ := content(apis[1], "GET", id, "wrong", "/file?path=/seed.txt", ""); code != 401 {
		t.Errorf("a wrong volume token: %d, want 401", code)
	}
	// The node's content route is the replicas': the volume token alone
	// opens nothing there.
	if code, _ := content(srv{url: nodes[on].url}, "GET", id, token, "/file?path=/seed.txt", ""); code != 401 {
		t.Errorf("the node's content route with the volume token: %d, want 401", code)
	}

	// A sandbox that mounts it runs on its node, whatever the load.
	var sbs []string
	for i := range 3 {
		code, m, raw := apis[i%2].do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120,"secure":true,"volumeMounts":[{"name":"data","path":"/mnt/data"}]}`)
		if code != 201 {
			t.Fatalf("create with the volume: %d %s", code, raw)
		}
		sbs = append(sbs, m["sandboxID"].(string))
		sbID, sbToken := m["sandboxID"].(string), m["envdAccessToken"].(string)
		if out, err := run(ctx, apis[(i+1)%2].url, sbID, sbToken, fmt.Sprintf("cat /mnt/data/seed.txt; echo %d > /mnt/data/from-%d", i, i)); err != nil || out != "from the API" {
			t.Errorf("the volume in sandbox %d: %q %v", i, out, err)
		}
	}
	if here, err := st.SandboxesOn(ctx, on); err != nil || len(here) != 3 {
		t.Errorf("node %s, the volume's, runs %v of the 3 sandboxes that mount it (%v)", on, here, err)
	}
	if code, m, raw := apis[1].do(t, "GET", "/sandboxes/"+sbs[0], keyA, ""); code != 200 || fmt.Sprint(m["volumeMounts"]) != "[map[name:data path:/mnt/data]]" {
		t.Errorf("the sandbox's volume mounts through the other replica: %d %s", code, raw)
	}
	for i := range 3 {
		if code, body := content(apis[i%2], "GET", id, token, fmt.Sprintf("/file?path=/from-%d", i), ""); code != 200 || body != fmt.Sprintf("%d\n", i) {
			t.Errorf("what sandbox %d wrote, through the API: %d %q", i, code, body)
		}
	}
	// The other node has fewer sandboxes now: the next volume goes there,
	// and one sandbox cannot mount both.
	other, otherToken, otherOn := makeVolume(apis[1], "elsewhere")
	if otherOn == on {
		t.Fatalf("both volumes on %s, though it runs every sandbox", on)
	}
	if code, _, raw := apis[0].do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":60,"volumeMounts":[{"name":"data","path":"/a"},{"name":"elsewhere","path":"/b"}]}`); code != 400 || !strings.Contains(string(raw), "different nodes") {
		t.Errorf("volumes of two nodes in one sandbox: %d %s", code, raw)
	}
	// Deleted with its node up: its files go at once.
	if code, _, raw := apis[0].do(t, "DELETE", "/volumes/"+other, keyA, ""); code != 204 {
		t.Errorf("delete: %d %s", code, raw)
	}
	if _, err := os.Stat(filepath.Join(nodes[otherOn].dataDir, "volumes", other+".img")); !os.IsNotExist(err) {
		t.Errorf("the deleted volume's image on its node: %v", err)
	}
	if code, _ := content(apis[0], "GET", other, otherToken, "/dir?path=/", ""); code != 404 {
		t.Errorf("the deleted volume's content: %d, want 404", code)
	}

	// Its node gone, the volume is kept but unavailable.
	for _, sb := range sbs {
		apis[0].do(t, "DELETE", "/sandboxes/"+sb, keyA, "")
	}
	nodes[on].stop()
	if code, body := content(apis[1], "GET", id, token, "/file?path=/seed.txt", ""); code != 503 {
		t.Errorf("the content of a volume whose node stopped: %d %s, want 503", code, body)
	}
	if code, _, raw := apis[0].do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":60,"volumeMounts":[{"name":"data","path":"/a"}]}`); code != 503 {
		t.Errorf("a sandbox mounting a volume whose node stopped: %d %s, want 503", code, raw)
	}
	if code, _, raw := apis[1].do(t, "GET", "/volumes", keyA, ""); code != 200 || !strings.Contains(string(raw), id) {
		t.Errorf("list with the volume's node gone: %d %s", code, raw)
	}
	// Deleted meanwhile: the node removes its files when it is back.
	if code, _, raw := apis[1].do(t, "DELETE", "/volumes/"+id, keyA, ""); code != 204 {
		t.Errorf("delete with its node gone: %d %s", code, raw)
	}
	img := filepath.Join(nodes[on].dataDir, "volumes", id+".img")
	if _, err := os.Stat(img); err != nil {
		t.Fatalf("the image before the node is back: %v", err)
	}
	back := startRole(t, false, on, dsn, nodes[on].dataDir, "")
	testkit.Eventually(t, 10*time.Second, func() error {
		if _, err := os.Stat(img); os.IsNotExist(err) {
			return nil
		}
		return errors.New("the node back kept the files of a volume deleted while it was away")
	})
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, r := range []role{back, nodes[otherOn]} {
		if strings.Contains(string(mounts), filepath.Join(r.dataDir, "volumes")) {
			t.Errorf("a volume is still mounted under %s", r.dataDir)
		}
	}
	left, _ := os.ReadDir(filepath.Join(back.dataDir, "volumes", "mnt"))
	for _, e := range left {
		t.Errorf("left under the node's volumes: %s", e.Name())
	}
}

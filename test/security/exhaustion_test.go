package security_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
	cove "github.com/covesandbox/cove/sdk/go"
)

// The tenant-exhaustion suite: one team tries to use up what every team
// shares on a node (descriptors, disk, delivery slots, rows), and the
// other team's work goes on, within a bound, with nothing left behind.

// templateBuild is a template being built through the API, as key.
type templateBuild struct {
	p          *coveProc
	key        string
	TemplateID string `json:"templateID"`
	BuildID    string `json:"buildID"`
}

func newBuild(t *testing.T, p *coveProc, key, name string) *templateBuild {
	t.Helper()
	b := &templateBuild{p: p, key: key}
	if code := apiJSON(t, p, key, "POST", "/v3/templates", map[string]any{"name": name, "cpuCount": 1, "memoryMB": 256}, b); code != 202 {
		t.Fatalf("create template %s: %d", name, code)
	}
	return b
}

// upload sends archive as the files named hash; the answer's status.
func (b *templateBuild) upload(t *testing.T, hash string, archive []byte) int {
	t.Helper()
	var l struct {
		Present bool   `json:"present"`
		URL     string `json:"url"`
	}
	if code := apiJSON(t, b.p, b.key, "GET", "/templates/"+b.TemplateID+"/files/"+hash, nil, &l); code != 201 {
		t.Fatalf("files link: %d", code)
	}
	code, raw := call(t, "PUT", l.URL, bytes.NewReader(archive))
	if code >= 300 {
		t.Logf("upload: %d %s", code, raw)
	}
	return code
}

// run starts the build with steps and waits for its end: its status and
// reason.
func (b *templateBuild) run(t *testing.T, steps []map[string]any) (string, string) {
	t.Helper()
	if code := apiJSON(t, b.p, b.key, "POST", "/v2/templates/"+b.TemplateID+"/builds/"+b.BuildID, map[string]any{"steps": steps}, nil); code != 202 {
		return "refused", fmt.Sprint(code)
	}
	var st struct {
		Status string `json:"status"`
		Reason struct {
			Message string `json:"message"`
		} `json:"reason"`
	}
	testkit.Eventually(t, 3*time.Minute, func() error {
		apiJSON(t, b.p, b.key, "GET", "/templates/"+b.TemplateID+"/builds/"+b.BuildID+"/status", nil, &st)
		if st.Status == "ready" || st.Status == "error" {
			return nil
		}
		return fmt.Errorf("the build is %q", st.Status)
	})
	return st.Status, st.Reason.Message
}

// zeroBomb is a tar.gz of one file of size zero bytes: a few hundred KiB
// that expand to size.
func zeroBomb(t *testing.T, name string, size int64) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(zero)) {
		tw.Write(zero[:min(left, int64(len(zero)))])
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// diskUsed is what the files under dir take on disk, not crossing into
// other file systems.
func diskUsed(t *testing.T, dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	return total
}

// TestCompressionBombCopy: a small archive that expands far past the
// team's storage quota, used by a COPY step, fails the build with the
// quota's error as it unpacks — never filling the disk — and leaves
// nothing behind; the other team builds meanwhile and after.
func TestCompressionBombCopy(t *testing.T) {
	p := twoTeams(t, "--network=false", "--pool-size", "0", "--team-max-storage-mb", "32")
	bomb := zeroBomb(t, "zeros", 512<<20)
	if len(bomb) > 1<<20 {
		t.Fatalf("the bomb is %d bytes compressed", len(bomb))
	}
	before := diskUsed(t, p.srv.DataDir)
	b := newBuild(t, p, apiKey, "bomb")
	hash := strings.Repeat("b0", 32)
	if code := b.upload(t, hash, bomb); code != 200 {
		t.Fatalf("upload: %d", code)
	}
	// What the data directory holds at its peak, sampled as the build
	// runs: the unpack stops at the quota, not once the archive is out.
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak.Store(max(peak.Load(), diskUsed(t, p.srv.DataDir)-before))
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	status, reason := b.run(t, []map[string]any{{"type": "COPY", "args": []string{"zeros", "/srv/", "", ""}, "filesHash": hash}})
	close(stop)
	<-sampled
	// (What the quota leaves is 32 MiB less the upload, which counts.)
	if status != "error" || !strings.Contains(reason, "the files of COPY zeros (with what the build may still store): writing more than 31 MiB") {
		t.Errorf("the bomb's build: %s %q, want it stopped as it unpacked, naming the bound", status, reason)
	}
	if peak.Load() > 96<<20 {
		t.Errorf("the data directory grew by %d MiB at the peak of the build", peak.Load()>>20)
	}
	// The other team's build of a small file is not held back.
	other := newBuild(t, p, otherKey, "small")
	if code := other.upload(t, hash, tarOf(t, "app.txt", "small\n")); code != 200 {
		t.Fatalf("upload: %d", code)
	}
	if status, reason := other.run(t, []map[string]any{{"type": "COPY", "args": []string{"app.txt", "/srv/", "", ""}, "filesHash": hash}}); status != "ready" {
		t.Errorf("the other team's build: %s %q", status, reason)
	}
	// The node holds the compressed upload and the small layer: nothing
	// of what the bomb expanded to.
	if grew := diskUsed(t, p.srv.DataDir) - before; grew > 16<<20 {
		t.Errorf("the data directory grew by %d MiB", grew>>20)
	}
}

// TestBuildsAgainstQuota: the team's storage quota bounds what its builds
// store as each layer is committed — a build whose second step passes it
// fails there — and builds started together share what the quota leaves:
// of three that each fit alone, one is built.
func TestBuildsAgainstQuota(t *testing.T) {
	p := twoTeams(t, "--network=false", "--pool-size", "0", "--team-max-storage-mb", "32")
	hash := strings.Repeat("c1", 32)
	twenty := zeroBomb(t, "twenty", 20<<20)
	copyStep := func(dest string) map[string]any {
		return map[string]any{"type": "COPY", "args": []string{"twenty", dest, "", ""}, "filesHash": hash}
	}
	two := newBuild(t, p, apiKey, "two-steps")
	if code := two.upload(t, hash, twenty); code != 200 {
		t.Fatalf("upload: %d", code)
	}
	if status, reason := two.run(t, []map[string]any{copyStep("/srv/a/"), copyStep("/srv/b/")}); status != "error" || !strings.Contains(reason, "step 2: ") || !strings.Contains(reason, " MiB") {
		t.Errorf("a build of two 20 MiB layers under a quota of 32 MiB: %s %q", status, reason)
	}
	builds := make([]*templateBuild, 3)
	for i := range builds {
		builds[i] = newBuild(t, p, apiKey, fmt.Sprint("together-", i))
	}
	results := make(chan string, len(builds))
	for i, b := range builds {
		go func() {
			status, _ := b.run(t, []map[string]any{copyStep(fmt.Sprintf("/srv/%d/", i))})
			results <- status
		}()
	}
	ready := 0
	for range builds {
		if <-results == "ready" {
			ready++
		}
	}
	if ready != 1 {
		t.Errorf("%d of 3 builds of 20 MiB started together under a quota of 32 MiB were built, want 1", ready)
	}
}

// TestUploadsAgainstQuota: what a team uploads for COPY steps counts in
// its storage quota, without a build: past what the quota leaves an
// upload is refused (429) and nothing of it is kept; a build past the cap
// on steps is refused.
func TestUploadsAgainstQuota(t *testing.T) {
	p := twoTeams(t, "--network=false", "--pool-size", "0", "--team-max-storage-mb", "8")
	b := newBuild(t, p, apiKey, "uploads")
	noise := func(seed byte, n int) []byte { // incompressible enough, and not shared
		out := make([]byte, n)
		x := uint32(seed) + 1
		for i := range out {
			x = x*1664525 + 1013904223
			out[i] = byte(x >> 24)
		}
		return out
	}
	before := diskUsed(t, p.srv.DataDir)
	if code := b.upload(t, strings.Repeat("d1", 32), noise(1, 6<<20)); code != 200 {
		t.Fatalf("the first upload, within the quota: %d", code)
	}
	if code := b.upload(t, strings.Repeat("d2", 32), noise(2, 6<<20)); code != 429 {
		t.Errorf("an upload past what the quota leaves: %d, want 429", code)
	}
	if grew := diskUsed(t, p.srv.DataDir) - before; grew > 8<<20 {
		t.Errorf("the data directory grew by %d MiB", grew>>20)
	}
	// The other team's quota is its own.
	other := newBuild(t, p, otherKey, "other-uploads")
	if code := other.upload(t, strings.Repeat("d2", 32), noise(3, 6<<20)); code != 200 {
		t.Errorf("the other team's upload: %d", code)
	}
	steps := make([]map[string]any, 129)
	for i := range steps {
		steps[i] = map[string]any{"type": "ENV", "args": []string{"N", fmt.Sprint(i)}}
	}
	if status, reason := newBuild(t, p, otherKey, "steps").run(t, steps); status != "refused" || reason != "400" {
		t.Errorf("a build of 129 steps: %s %s, want refused with 400", status, reason)
	}
}

// holdConns is a program that opens n connections to the fake internet's
// port 80, sends each a request for name and keeps them all open.
const holdConns = `
import socket, sys, time
held = []
for _ in range(int(sys.argv[2])):
    try:
        s = socket.create_connection(("203.0.113.1", 80), timeout=3)
        s.sendall(b"GET / HTTP/1.1\r\nHost: " + sys.argv[1].encode() + b"\r\n\r\n")
        held.append(s)
    except OSError:
        pass
print(len(held), flush=True)
time.sleep(600)
`

// heldByServer counts the server host's established TCP connections to
// the fake internet's port 80 (the egress proxy's, upstream).
func heldByServer(t *testing.T) int {
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[2] == "017100CB:0050" && f[3] == "01" { // 203.0.113.1:80, ESTABLISHED
			n++
		}
	}
	return n
}

// TestEgressConnectionsBounded: a sandbox with a proxied policy that
// opens connections without end holds at most --egress-max-connections
// in the node's egress proxy (shown in its metrics), the other team's
// creates and commands go on, and its kill closes them all, towards the
// far end too.
func TestEgressConnectionsBounded(t *testing.T) {
	const netRange = "198.18.244.0/24"
	dns := testutil.ServeDNS(t)
	dns.Set("held.test", 60, testutil.InternetAddr)
	p := twoTeams(t, "--network=true", "--network-range", netRange, "--pool-size", "0", "--metrics-interval", "1s",
		"--egress-max-connections", "8", "--egress-nameserver", dns.Addr.String())
	testutil.FakeInternet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var created struct {
		SandboxID string `json:"sandboxID"`
	}
	body := map[string]any{"timeout": 300, "network": map[string]any{"allowOut": []string{"held.test"}, "denyOut": []string{"0.0.0.0/0"}}}
	if code := apiJSON(t, p, apiKey, "POST", "/v2/sandboxes", body, &created); code != 201 {
		t.Fatalf("create with allowOut: %d", code)
	}
	c := client(t, p.srv)
	sb, err := c.Connect(ctx, created.SandboxID, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Kill(ctx)
	if _, err := sb.Files.Write(ctx, "/tmp/hold.py", strings.NewReader(holdConns)); err != nil {
		t.Fatal(err)
	}
	mustRun(t, ctx, sb, "user", "nohup python3 /tmp/hold.py held.test 40 > /tmp/held 2>&1 &")
	testkit.Eventually(t, time.Minute, func() error {
		ms, err := sb.Metrics(ctx)
		if err != nil {
			return err
		}
		if len(ms) == 0 || ms[len(ms)-1].EgressConnections != 8 {
			return fmt.Errorf("the sandbox's metrics: %+v, want 8 egress connections", ms)
		}
		return nil
	})
	if n := heldByServer(t); n > 8 {
		t.Errorf("the node holds %d connections upstream for a sandbox capped at 8", n)
	}
	// The other team works as before.
	other, err := cove.NewClient(cove.WithAPIURL(p.srv.URL), cove.WithSandboxURL(p.srv.URL), cove.WithAPIKey(otherKey))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := other.Create(ctx, cove.CreateOptions{})
	if err != nil {
		t.Fatalf("the other team's create: %v", err)
	}
	if r := mustRun(t, ctx, theirs, "user", "echo ok"); strings.TrimSpace(r.out) != "ok" {
		t.Errorf("the other team's command: %q", r.out)
	}
	theirs.Kill(ctx)
	// Killed, the sandbox holds nothing: its connections are closed at
	// once, towards the far end too.
	if err := sb.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() error {
		if n := heldByServer(t); n != 0 {
			return fmt.Errorf("the node still holds %d connections upstream", n)
		}
		return nil
	})
}

// TestEgressTeamShare: one team's sandboxes that open connections
// without end through the egress proxy hold at most the team's share of
// the node (--egress-max-connections-team; the refusals counted as
// "team"), while another team's sandbox goes on connecting through its
// own allowOut; each held connection costs the server the two sockets it
// is counted for (no splice pipes), and once the first team's sandboxes
// are killed the server's descriptors come back within seconds.
func TestEgressTeamShare(t *testing.T) {
	const netRange = "198.18.238.0/24"
	const perSandbox, perTeam = 40, 60
	dns := testutil.ServeDNS(t)
	dns.Set("held.test", 60, testutil.InternetAddr)
	metricsAddr := testutil.FreeAddr(t)
	p := twoTeams(t, "--network=true", "--network-range", netRange, "--pool-size", "0", "--metrics-listen", metricsAddr,
		"--egress-max-connections", fmt.Sprint(perSandbox), "--egress-max-connections-team", fmt.Sprint(perTeam), "--egress-nameserver", dns.Addr.String())
	testutil.FakeInternet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// The first team's sandboxes are proxied for a name and allowed by
	// address too (their connections copied as they are), the other's
	// allowed by the name alone (each plain-HTTP request checked).
	byAddress := map[string]any{"allowOut": []string{"held.test", testutil.InternetAddr + "/32"}, "denyOut": []string{"0.0.0.0/0"}}
	byName := map[string]any{"allowOut": []string{"held.test"}, "denyOut": []string{"0.0.0.0/0"}}
	create := func(key string, network map[string]any) *cove.Sandbox {
		t.Helper()
		var created struct {
			SandboxID string `json:"sandboxID"`
		}
		if code := apiJSON(t, p, key, "POST", "/v2/sandboxes", map[string]any{"timeout": 300, "network": network}, &created); code != 201 {
			t.Fatalf("create with allowOut: %d", code)
		}
		c, err := cove.NewClient(cove.WithAPIURL(p.srv.URL), cove.WithSandboxURL(p.srv.URL), cove.WithAPIKey(key))
		if err != nil {
			t.Fatal(err)
		}
		sb, err := c.Connect(ctx, created.SandboxID, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.Kill(context.Background()) })
		return sb
	}
	mine := []*cove.Sandbox{create(apiKey, byAddress), create(apiKey, byAddress)}
	theirs := create(otherKey, byName)
	for _, sb := range mine {
		if _, err := sb.Files.Write(ctx, "/tmp/hold.py", strings.NewReader(holdConns)); err != nil {
			t.Fatal(err)
		}
	}
	pid := p.cmd.Process.Pid
	before := serverFDs(t, pid)
	for _, sb := range mine {
		mustRun(t, ctx, sb, "user", fmt.Sprintf("nohup python3 /tmp/hold.py held.test %d > /tmp/held 2>&1 &", perSandbox))
	}
	// The team holds its share, no more: the far end sees perTeam, the
	// rest were reset and counted as the team's refusals.
	testkit.Eventually(t, time.Minute, func() error {
		if n := heldByServer(t); n != perTeam {
			return fmt.Errorf("the node holds %d connections upstream, want the team's %d", n, perTeam)
		}
		if n := scrape(t, metricsAddr, `cove_egress_refused_total{limit="team"}`); n != 2*perSandbox-perTeam {
			return fmt.Errorf("%d refused for the team, want %d", n, 2*perSandbox-perTeam)
		}
		return nil
	})
	// What they cost the server: the two sockets of each, counted in its
	// descriptor budget; a little more for the API and agents' own.
	const slack = 40
	got := serverFDs(t, pid) - before
	t.Logf("the server holds %d descriptors more for %d connections", got, perTeam)
	if got > 2*perTeam+slack {
		t.Errorf("the server holds %d descriptors more for %d connections, want at most %d (2 a connection)", got, perTeam, 2*perTeam+slack)
	}
	// The other team connects through its own allowOut meanwhile, several
	// times, each answered by the far end.
	const ask = `
import http.client
for _ in range(5):
    c = http.client.HTTPConnection("203.0.113.1", 80, timeout=5)
    c.request("GET", "/", headers={"Host": "held.test"})
    print(c.getresponse().read().decode())
    c.close()
`
	if _, err := theirs.Files.Write(ctx, "/tmp/ask.py", strings.NewReader(ask)); err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, ctx, theirs, "user", "python3 /tmp/ask.py"); strings.Count(r.out, "served held.test") != 5 {
		t.Errorf("the other team's requests while one team holds its share: %q", r.out)
	}
	if got := serverFDs(t, pid) - before; got > 2*perTeam+slack {
		t.Errorf("the server holds %d descriptors more for %d connections, want at most %d", got, perTeam, 2*perTeam+slack)
	}
	// Killed, the team's sandboxes hold nothing: their connections close
	// and the server's descriptors come back within seconds.
	for _, sb := range mine {
		if err := sb.Kill(ctx); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 10*time.Second, func() error {
		if n := heldByServer(t); n != 0 {
			return fmt.Errorf("the node still holds %d connections upstream", n)
		}
		if got := serverFDs(t, pid) - before; got > slack {
			return fmt.Errorf("the server still holds %d descriptors more than before the connections", got)
		}
		return nil
	})
}

// serverFDs counts the descriptors the process pid has open.
func serverFDs(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// scrape reads one sample (its full name with labels) from the metrics at
// addr; 0 when absent.
func scrape(t *testing.T, addr, sample string) int {
	t.Helper()
	code, body := call(t, "GET", "http://"+addr+"/metrics", nil)
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metrics: %q", line)
			}
			return int(n)
		}
	}
	return 0
}

// TestOversizedMetadata: metadata past its bounds is refused with a 400
// naming the bound, before anything is created or recorded.
func TestOversizedMetadata(t *testing.T) {
	p := twoTeams(t, "--network=false", "--pool-size", "0")
	big := map[string]string{}
	for i := range 300 {
		big[fmt.Sprint("key-", i)] = strings.Repeat("v", 3000)
	}
	for name, md := range map[string]map[string]string{
		"900 KB in all": big,
		"a long value":  {"k": strings.Repeat("v", 4096)},
		"too many keys": func() map[string]string {
			m := map[string]string{}
			for i := range 100 {
				m[fmt.Sprint(i)] = "v"
			}
			return m
		}(),
	} {
		before := diskUsed(t, p.srv.DataDir)
		code, raw := call(t, "POST", p.srv.URL+"/v2/sandboxes", strings.NewReader(mustJSON(t, map[string]any{"timeout": 60, "metadata": md})),
			"X-API-Key", apiKey, "Content-Type", "application/json")
		if code != 400 || !strings.Contains(raw, "at most") {
			t.Errorf("%s: %d %s, want 400 naming the bound", name, code, raw)
		}
		if grew := diskUsed(t, p.srv.DataDir) - before; grew > 256<<10 {
			t.Errorf("%s: the data directory grew by %d KiB", name, grew>>10)
		}
	}
	var list []map[string]any
	if code := apiJSON(t, p, apiKey, "GET", "/v2/sandboxes", nil, &list); code != 200 || len(list) != 0 {
		t.Errorf("sandboxes after refused creates: %d %v", code, list)
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestVolumesAgainstQuota: a team's volumes count in its storage quota:
// once they fill it, no other volume, build or upload of the team's is
// taken, and the other team's are.
func TestVolumesAgainstQuota(t *testing.T) {
	p := twoTeams(t, "--network=false", "--pool-size", "0", "--team-max-storage-mb", "8", "--volume-size", "16")
	volume := func(key, name string) int {
		var v struct {
			VolumeID string `json:"volumeID"`
		}
		code := apiJSON(t, p, key, "POST", "/volumes", map[string]any{"name": name}, &v)
		if code == 201 {
			t.Cleanup(func() { apiJSON(t, p, key, "DELETE", "/volumes/"+v.VolumeID, nil, nil) })
		}
		return code
	}
	if code := volume(apiKey, "first"); code != 201 {
		t.Fatalf("the first volume: %d", code)
	}
	if code := volume(apiKey, "second"); code != 429 {
		t.Errorf("a volume past the storage quota: %d, want 429", code)
	}
	b := newBuild(t, p, apiKey, "after-volumes")
	if code := b.upload(t, strings.Repeat("e1", 32), tarOf(t, "a", "a")); code != 429 {
		t.Errorf("an upload past the storage quota: %d, want 429", code)
	}
	if code := volume(otherKey, "theirs"); code != 201 {
		t.Errorf("the other team's volume: %d", code)
	}
}

// Package cli_test drives the cove CLI (bin/cove) against a real server.
package cli_test

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil"
)

const key = "e2b_000000000000000000000000000000000000c11e"

type cli struct {
	bin string
	env []string
}

// run runs bin/cove with args and returns stdout, stderr and the exit code.
func (c cli) run(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = c.env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestCLI(t *testing.T) {
	srv := testutil.StartServer(t, key)
	c := cli{bin: testutil.Binary(t), env: append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY="+key)}

	out, errOut, code := c.run(t, "", "sandbox", "create", "--metadata", "owner=cli", "--env", "GREETING=hi", "--timeout", "2m")
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "i") {
		t.Fatalf("create: %q %q %d", out, errOut, code)
	}
	if out, _, code := c.run(t, "", "sandbox", "list", "--json", "-m", "owner=nobody"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("list --json of none: %q %d, want []", out, code)
	}
	if out, _, code := c.run(t, "", "--version"); code != 0 || !strings.HasPrefix(out, "cove ") {
		t.Errorf("--version: %q %d", out, code)
	}
	if out, _, _ := c.run(t, "", "sandbox", "list", "-m", "owner=cli"); !strings.Contains(out, id) || !strings.Contains(out, "owner=cli") ||
		!strings.Contains(out, " base ") || !strings.Contains(out, "namespaces") {
		t.Errorf("list (id, template name, driver, metadata): %q", out)
	}
	if out, _, _ := c.run(t, "", "sandbox", "list", "--template", "nope"); strings.Contains(out, id) {
		t.Errorf("list --template nope: %q", out)
	}
	if out, _, code := c.run(t, "", "sandbox", "info", id); code != 0 || !strings.Contains(out, `"sandboxID": "`+id+`"`) {
		t.Errorf("info: %q %d", out, code)
	}
	out, errOut, code = c.run(t, "", "sandbox", "exec", id, "--", "sh", "-c", "echo $GREETING; echo oops >&2; exit 3")
	if out != "hi\n" || errOut != "oops\n" || code != 3 {
		t.Errorf("exec: %q %q %d, want hi, oops, 3", out, errOut, code)
	}
	if out, _, code := c.run(t, "", "sandbox", "exec", "-u", "root", "-w", "/tmp", id, "--", "pwd; whoami"); out != "/tmp\nroot\n" || code != 0 {
		t.Errorf("exec as root in /tmp: %q %d", out, code)
	}
	if out, _, code := c.run(t, "one\ntwo\n", "sandbox", "exec", "-i", id, "--", "wc -l; tr a-z A-Z </dev/null"); strings.TrimSpace(out) != "2" || code != 0 {
		t.Errorf("exec -i: %q %d, want 2 lines counted", out, code)
	}
	if out, _, code := c.run(t, "", "sandbox", "exec", "-t", id, "--", "tty; exit 4"); !strings.Contains(out, "/dev/pts/") || code != 4 {
		t.Errorf("exec -t: %q %d, want a terminal and exit 4", out, code)
	}

	local := filepath.Join(t.TempDir(), "in.txt")
	os.WriteFile(local, []byte("through cp"), 0o644)
	if _, errOut, code := c.run(t, "", "sandbox", "cp", local, id+":/home/user/in.txt"); code != 0 {
		t.Fatalf("cp in: %q", errOut)
	}
	back := filepath.Join(t.TempDir(), "back.txt")
	if _, errOut, code := c.run(t, "", "sandbox", "cp", id+":/home/user/in.txt", back); code != 0 {
		t.Fatalf("cp out: %q", errOut)
	}
	if b, _ := os.ReadFile(back); string(b) != "through cp" {
		t.Errorf("round trip through cp: %q", b)
	}
	if out, _, _ := c.run(t, "", "sandbox", "cp", id+":/home/user/in.txt", "-"); out != "through cp" {
		t.Errorf("cp to stdout: %q", out)
	}
	// A directory on either side takes the file's name, as cp does.
	if _, errOut, code := c.run(t, "", "sandbox", "cp", local, id+":/tmp"); code != 0 {
		t.Errorf("cp into a sandbox directory: %q", errOut)
	} else if out, _, _ := c.run(t, "", "sandbox", "exec", id, "--", "cat /tmp/in.txt"); out != "through cp" {
		t.Errorf("cp into /tmp wrote %q", out)
	}
	localDir := t.TempDir()
	if _, errOut, code := c.run(t, "", "sandbox", "cp", id+":/home/user/in.txt", localDir); code != 0 {
		t.Errorf("cp into a local directory: %q", errOut)
	} else if b, _ := os.ReadFile(filepath.Join(localDir, "in.txt")); string(b) != "through cp" {
		t.Errorf("cp into a local directory wrote %q", b)
	}
	if _, errOut, code := c.run(t, "", "sandbox", "cp", id+":/home/user/missing.txt", "-"); code == 0 || !strings.Contains(errOut, "no such file") || strings.Contains(errOut, "not found") {
		t.Errorf("cp of a missing file: %q %d, want it named missing (not the sandbox)", errOut, code)
	}
	// shell without a terminal: commands from stdin, the shell's exit code.
	out, _, code = c.run(t, "echo in-shell-$((6*7))\nexit 7\n", "sandbox", "shell", id)
	if code != 7 || !strings.Contains(out, "in-shell-42") {
		t.Errorf("shell: %q %d, want in-shell-42 and exit 7", out, code)
	}

	if _, errOut, code := c.run(t, "", "sandbox", "cp", "a", "b"); code == 0 || !strings.Contains(errOut, "SANDBOX:/path") {
		t.Errorf("cp between local paths: %q %d", errOut, code)
	}
	if out, _, code := c.run(t, "", "sandbox", "pause", id); code != 0 || !strings.Contains(out, "paused "+id) {
		t.Errorf("pause: %q %d", out, code)
	}
	if _, errOut, code := c.run(t, "", "sandbox", "pause", id); code == 0 || !strings.Contains(errOut, "paused already") {
		t.Errorf("pause twice: %q %d", errOut, code)
	}
	if out, _, _ := c.run(t, "", "sandbox", "list", "--state", "paused"); !strings.Contains(out, id) {
		t.Errorf("list --state paused: %q", out)
	}
	if out, _, code := c.run(t, "", "sandbox", "resume", id); code != 0 || !strings.Contains(out, "resumed "+id) {
		t.Errorf("resume: %q %d", out, code)
	}
	if out, _, code := c.run(t, "", "sandbox", "exec", id, "--", "echo back"); code != 0 || out != "back\n" {
		t.Errorf("exec after resume: %q %d", out, code)
	}
	if _, errOut, code := c.run(t, "", "sandbox", "resume", id); code == 0 || !strings.Contains(errOut, "running, not paused") {
		t.Errorf("resume a running sandbox: %q %d", errOut, code)
	}
	// Snapshots and fork.
	snap, errOut, code := c.run(t, "", "sandbox", "snapshot", id, "--name", "cli-snap")
	if snap = strings.TrimSpace(snap); code != 0 || snap != "cli-snap:default" {
		t.Errorf("snapshot: %q %q %d", snap, errOut, code)
	}
	if out, _, _ := c.run(t, "", "snapshot", "list", "--sandbox", id); !strings.Contains(out, "cli-snap:default") {
		t.Errorf("snapshot list: %q", out)
	}
	fromSnap, _, _ := c.run(t, "", "sandbox", "create", "--template", snap)
	if fromSnap = strings.TrimSpace(fromSnap); fromSnap == "" {
		t.Error("no sandbox from the snapshot")
	} else if out, _, _ := c.run(t, "", "sandbox", "exec", fromSnap, "--", "cat /tmp/in.txt"); out != "through cp" {
		t.Errorf("a file in the sandbox from the snapshot: %q", out)
	}
	kids, errOut, code := c.run(t, "", "sandbox", "fork", id, "-n", "2")
	if ids := strings.Fields(kids); code != 0 || len(ids) != 2 {
		t.Errorf("fork: %q %q %d", kids, errOut, code)
	} else if out, _, _ := c.run(t, "", "sandbox", "exec", ids[1], "--", "cat /tmp/in.txt"); out != "through cp" {
		t.Errorf("a file in a fork: %q", out)
	}
	// Volumes.
	if _, errOut, code := c.run(t, "", "volume", "create", "cli-vol"); code != 0 {
		t.Errorf("volume create: %q %d", errOut, code)
	}
	withVol, errOut, _ := c.run(t, "", "sandbox", "create", "--volume", "cli-vol:/data")
	if withVol = strings.TrimSpace(withVol); withVol == "" {
		t.Errorf("a sandbox with a volume: %q", errOut)
	} else if out, _, _ := c.run(t, "", "sandbox", "exec", withVol, "--", "echo kept > /data/f && cat /data/f"); out != "kept\n" {
		t.Errorf("the volume in the sandbox: %q", out)
	}
	if out, _, _ := c.run(t, "", "volume", "list"); !strings.Contains(out, "cli-vol") {
		t.Errorf("volume list: %q", out)
	}
	if _, errOut, code := c.run(t, "", "sandbox", "create", "--volume", "nope"); code == 0 || !strings.Contains(errOut, "NAME:/path") {
		t.Errorf("a bad --volume: %q %d", errOut, code)
	}
	if out, _, code := c.run(t, "", "volume", "delete", "cli-vol"); code != 0 || !strings.Contains(out, "deleted cli-vol") {
		t.Errorf("volume delete: %q %d", out, code)
	}
	if out, _, code := c.run(t, "", "snapshot", "delete", snap); code != 0 || !strings.Contains(out, "deleted "+snap) {
		t.Errorf("snapshot delete: %q %d", out, code)
	}
	if out, _, code := c.run(t, "", "sandbox", "kill", id); code != 0 || !strings.Contains(out, "killed "+id) {
		t.Errorf("kill: %q %d", out, code)
	}
	var tagged []string
	for range 2 {
		out, _, _ := c.run(t, "", "sandbox", "create", "--metadata", "batch=b1")
		tagged = append(tagged, strings.TrimSpace(out))
	}
	other, _, _ := c.run(t, "", "sandbox", "create")
	other = strings.TrimSpace(other)
	if out, errOut, code := c.run(t, "", "sandbox", "kill", "--all", "-m", "batch=b1"); code != 0 || !strings.Contains(out, tagged[0]) || !strings.Contains(out, tagged[1]) || strings.Contains(out, other) {
		t.Errorf("kill --all -m batch=b1: %q %q %d", out, errOut, code)
	}
	if out, _, code := c.run(t, "", "sandbox", "kill", "--all"); code != 0 || !strings.Contains(out, "killed "+other) {
		t.Errorf("kill --all: %q %d", out, code)
	}
	if _, errOut, code := c.run(t, "", "sandbox", "kill"); code == 0 || !strings.Contains(errOut, "--all") {
		t.Errorf("kill with nothing: %q %d", errOut, code)
	}
	if _, errOut, code := c.run(t, "", "sandbox", "info", id); code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("info after kill: %q %d", errOut, code)
	}
	bad := cli{bin: c.bin, env: append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY=e2b_"+strings.Repeat("9", 40))}
	if _, errOut, code := bad.run(t, "", "sandbox", "list"); code == 0 || !strings.Contains(errOut, "refused the API key") {
		t.Errorf("wrong key: %q %d", errOut, code)
	}
	none := cli{bin: c.bin, env: append(os.Environ(), "COVE_API_URL=http://127.0.0.1:1", "COVE_API_KEY="+key)}
	if _, errOut, code := none.run(t, "", "sandbox", "list"); code == 0 || !strings.Contains(errOut, "is `cove server` running") {
		t.Errorf("no server: %q %d", errOut, code)
	}
	if left := srv.Leftovers(); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestKeyCreate: a lost key is replaced with cove key create, which a
// running server accepts at once; the output has the variables to export.
func TestKeyCreate(t *testing.T) {
	srv := testutil.StartServer(t, key)
	c := cli{bin: testutil.Binary(t), env: os.Environ()}
	out, errOut, code := c.run(t, "", "key", "create", "--data-dir", srv.DataDir, "--listen", srv.Addr)
	if code != 0 {
		t.Fatalf("key create: %d %s", code, errOut)
	}
	m := regexp.MustCompile(`export COVE_API_URL=(\S+) COVE_API_KEY=(e2b_[0-9a-f]{40})`).FindStringSubmatch(out)
	if m == nil || m[1] != srv.URL || !strings.Contains(out, "export E2B_API_URL="+srv.URL+" E2B_SANDBOX_URL="+srv.URL+" E2B_VOLUME_API_URL="+srv.URL+" E2B_API_KEY="+m[2]) {
		t.Fatalf("key create printed:\n%s", out)
	}
	withNew := cli{bin: c.bin, env: append(os.Environ(), "COVE_API_URL="+m[1], "COVE_API_KEY="+m[2])}
	if _, errOut, code := withNew.run(t, "", "sandbox", "list"); code != 0 {
		t.Errorf("the new key: %d %s", code, errOut)
	}
	if _, errOut, code := c.run(t, "", "key", "create", "--data-dir", t.TempDir()); code == 0 || !strings.Contains(errOut, "no Cove data") {
		t.Errorf("key create without a server's data: %d %s", code, errOut)
	}
}

// TestSandboxLogs: `cove sandbox logs` prints a sandbox's life and its
// agent's lines; with -f it prints lines as they come and returns once the
// sandbox is gone.
func TestSandboxLogs(t *testing.T) {
	srv := testutil.StartServer(t, key)
	c := cli{bin: testutil.Binary(t), env: append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY="+key)}
	out, errOut, code := c.run(t, "", "sandbox", "create", "--timeout", "2m")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("create: %q %q %d", out, errOut, code)
	}
	follow := exec.Command(c.bin, "sandbox", "logs", "-f", id)
	follow.Env = c.env
	pipe, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	follow.Stderr = follow.Stdout
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = follow.Process.Kill() })
	followed := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			followed <- sc.Text()
		}
		close(followed)
	}()
	// next returns the next line -f printed holding want, failing the
	// test if -f ends or prints none within 30 s.
	var got []string
	next := func(want string) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-followed:
				if !ok {
					t.Fatalf("logs -f ended before %q: %q", want, got)
				}
				got = append(got, l)
				if strings.Contains(l, want) {
					return
				}
			case <-timeout:
				t.Fatalf("logs -f printed no %q in 30 s: %q", want, got)
			}
		}
	}
	next("sandbox created")
	if _, errOut, code := c.run(t, "", "sandbox", "exec", id, "--", "true"); code != 0 {
		t.Fatalf("exec: %q %d", errOut, code)
	}
	out, errOut, code = c.run(t, "", "sandbox", "logs", id)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.Contains(lines[0], " INFO  sandbox created ") || !strings.Contains(lines[0], "template=base") ||
		!strings.Contains(lines[1], "process started") || !strings.Contains(lines[1], "source=agent") || !strings.Contains(lines[2], "process ended") {
		t.Errorf("logs: %q %q %d", out, errOut, code)
	}
	if out, _, code := c.run(t, "", "sandbox", "logs", "--level", "warn", id); code != 0 || out != "" {
		t.Errorf("logs --level warn: %q %d", out, code)
	}
	if _, errOut, code := c.run(t, "", "sandbox", "logs", "--level", "loud", id); code == 0 || !strings.Contains(errOut, "invalid level") {
		t.Errorf("logs --level loud: %q %d", errOut, code)
	}
	// -f prints the agent's lines as they come, the kill, then returns.
	next("process ended")
	if _, _, code := c.run(t, "", "sandbox", "kill", id); code != 0 {
		t.Fatalf("kill: %d", code)
	}
	next("sandbox killed")
	if l, ok := <-followed; ok {
		t.Errorf("logs -f printed %q after the kill", l)
	}
	if err := follow.Wait(); err != nil || len(got) != 4 || !strings.Contains(got[1], "process started") {
		t.Errorf("logs -f: %v %q", err, got)
	}
	if out, _, code := c.run(t, "", "sandbox", "logs", "--search", "killed", id); code != 0 || !strings.Contains(out, "sandbox killed") {
		t.Errorf("logs after the kill: %q %d", out, code)
	}
	if _, errOut, code := c.run(t, "", "sandbox", "logs", "inosuchsandbox00000"); code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("logs of no sandbox: %q %d", errOut, code)
	}
}

// TestTeamsAndKeys: teams and their keys from the command line, beside a
// running server: a new team's key works at once and sees only its own
// sandboxes; keys are listed masked, revoked (never a team's last), and a
// team is deleted only once it holds nothing (no sandbox, no volume).
func TestTeamsAndKeys(t *testing.T) {
	srv := testutil.StartServer(t, key)
	c := cli{bin: testutil.Binary(t), env: os.Environ()}
	dir := []string{"--data-dir", srv.DataDir}
	must := func(args ...string) string {
		t.Helper()
		out, errOut, code := c.run(t, "", append(args, dir...)...)
		if code != 0 {
			t.Fatalf("cove %s: %d %s", strings.Join(args, " "), code, errOut)
		}
		if !strings.Contains(errOut, "using the data directory "+srv.DataDir) {
			t.Errorf("cove %s does not say which state it uses: %q", strings.Join(args, " "), errOut)
		}
		return out
	}
	if out := must("team", "create", "acme", "--max-sandboxes", "1"); !strings.Contains(out, "created team acme") {
		t.Errorf("team create: %q", out)
	}
	if _, errOut, code := c.run(t, "", append([]string{"team", "create", "acme"}, dir...)...); code == 0 || !strings.Contains(errOut, "exists") {
		t.Errorf("a second team acme: %d %s", code, errOut)
	}
	newKey := func(name string) string {
		t.Helper()
		m := regexp.MustCompile(`E2B_API_KEY=(e2b_[0-9a-f]{40})`).FindStringSubmatch(must("key", "create", "--team", "acme", "--name", name, "--listen", srv.Addr))
		if m == nil {
			t.Fatal("key create printed no key")
		}
		return m[1]
	}
	first := newKey("first")
	acme := cli{bin: c.bin, env: append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY="+first)}
	def := cli{bin: c.bin, env: append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY="+key)}
	out, errOut, code := def.run(t, "", "sandbox", "create", "--timeout", "2m")
	theirs := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("the default team's sandbox: %d %s", code, errOut)
	}
	defer def.run(t, "", "sandbox", "kill", theirs)
	if out, errOut, code := acme.run(t, "", "sandbox", "list"); code != 0 || strings.Contains(out, theirs) {
		t.Errorf("team acme's list: %d %q %s", code, out, errOut)
	}
	// The list shows each key masked: its prefix, 2 and 4 characters.
	list := must("key", "list", "--team", "acme")
	if !strings.Contains(list, "e2b_"+first[4:6]+"…"+first[len(first)-4:]) || strings.Contains(list, first) {
		t.Errorf("key list:\n%s", list)
	}
	id := regexp.MustCompile(`(?m)^([0-9a-f-]{36})\s+acme\s+first`).FindStringSubmatch(list)
	if id == nil {
		t.Fatalf("key list has no id for the key first:\n%s", list)
	}
	if _, errOut, code := c.run(t, "", append([]string{"key", "revoke", "--team", "acme", id[1]}, dir...)...); code == 0 || !strings.Contains(errOut, "last API key of team") {
		t.Errorf("revoke a team's last key: %d %s", code, errOut)
	}
	second := newKey("second")
	must("key", "revoke", "--team", "acme", id[1])
	if _, errOut, code := acme.run(t, "", "sandbox", "list"); code == 0 || !strings.Contains(errOut, "invalid API key") {
		t.Errorf("a revoked key: %d %s", code, errOut)
	}
	acme.env = append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY="+second)
	out, errOut, code = acme.run(t, "", "sandbox", "create", "--timeout", "2m")
	if code != 0 {
		t.Fatalf("team acme's sandbox: %d %s", code, errOut)
	}
	mine := strings.TrimSpace(out)
	if _, errOut, code := acme.run(t, "", "sandbox", "create"); code == 0 || !strings.Contains(errOut, "team quota") {
		t.Errorf("a second sandbox past the team's quota of 1: %d %s", code, errOut)
	}
	if out := must("team", "list"); !regexp.MustCompile(`(?m)^acme\s+\S+\s+1\s+1\s+server's`).MatchString(out) {
		t.Errorf("team list:\n%s", out)
	}
	if _, errOut, code := c.run(t, "", append([]string{"team", "delete", "acme"}, dir...)...); code == 0 || !strings.Contains(errOut, "kill them first") {
		t.Errorf("delete a team with a sandbox: %d %s", code, errOut)
	}
	if _, errOut, code := acme.run(t, "", "sandbox", "kill", mine); code != 0 {
		t.Fatalf("kill: %d %s", code, errOut)
	}
	// A volume would outlive its team with no key left to delete it.
	if _, errOut, code := acme.run(t, "", "volume", "create", "acme-data"); code != 0 {
		t.Fatalf("volume create: %d %s", code, errOut)
	}
	if _, errOut, code := c.run(t, "", append([]string{"team", "delete", "acme"}, dir...)...); code == 0 || !strings.Contains(errOut, "1 volumes: delete them first") {
		t.Errorf("delete a team with a volume: %d %s", code, errOut)
	}
	if _, errOut, code := acme.run(t, "", "volume", "delete", "acme-data"); code != 0 {
		t.Fatalf("volume delete: %d %s", code, errOut)
	}
	must("team", "delete", "acme")
	if _, errOut, code := acme.run(t, "", "sandbox", "list"); code == 0 || !strings.Contains(errOut, "invalid API key") {
		t.Errorf("a deleted team's key: %d %s", code, errOut)
	}
}

// TestTeamsReadme runs the README's teams and keys block, as written,
// beside a running server (COVE_DATA_DIR names its data directory).
func TestTeamsReadme(t *testing.T) {
	srv := testutil.StartServer(t, key)
	_, block := testutil.DocBlock(t, "../../README.md", "readme:teams")
	if !strings.Contains(block, "cove team create") {
		t.Fatal("README.md's teams block creates no team")
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(testutil.Binary(t))+":"+os.Getenv("PATH"), "COVE_DATA_DIR="+srv.DataDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's teams block: %v\n%s", err, out)
	}
	for _, want := range []string{"created team acme", "E2B_API_KEY=e2b_", "e2b_", "max sandboxes 20", "acme"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the README's teams block printed no %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^acme\s+\S+\s+1\s+20\s`).Match(out) {
		t.Errorf("team list after the block:\n%s", out)
	}
}

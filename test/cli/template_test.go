package cli_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// A Dockerfile with every instruction Cove builds, from the base template.
const dockerfile = `# every instruction
FROM base
ARG GREETING=hello
ENV APP_HOME=/srv/app MODE="build test"
WORKDIR $APP_HOME
COPY app/ ./
COPY --chown=user:user --chmod=640 conf.txt /etc/app/conf.txt
ADD conf.txt extra.txt
USER root
RUN echo "$GREETING from $(id -un) in $(pwd)" > greeting.txt \
 && cat greeting.txt
USER user
RUN touch /home/user/made-by-user
EXPOSE 8080
CMD python3 -m http.server 8080
`

func writeContext(t *testing.T, dockerfile string) string {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "app"), 0o755)
	os.WriteFile(filepath.Join(dir, "app", "main.py"), []byte("print('app')\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "conf.txt"), []byte("cfg\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644)
	return dir
}

func TestTemplateBuild(t *testing.T) {
	srv := testutil.StartServer(t, key)
	c := cli{bin: testutil.Binary(t), env: append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY="+key)}
	ctxDir := writeContext(t, dockerfile)
	ready := `python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8080')"`

	out, errOut, code := c.run(t, "", "template", "build", "--name", "myapp", "--ready-cmd", ready, "--build-arg", "GREETING=hi", ctxDir)
	if code != 0 {
		t.Fatalf("build: %s %s", out, errOut)
	}
	for _, want := range []string{"[  1] ENV", "hi from root in /srv/app", "ready: ", "built myapp"} {
		if !strings.Contains(out, want) {
			t.Errorf("build output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "EXPOSE is ignored") {
		t.Errorf("no warning for EXPOSE: %q", errOut)
	}

	// Unchanged: every step from the cache.
	start := time.Now()
	out, _, code = c.run(t, "", "template", "build", "--name", "myapp", "--ready-cmd", ready, "--build-arg", "GREETING=hi", ctxDir)
	t.Logf("unchanged rebuild: %v", time.Since(start))
	if code != 0 || strings.Count(out, "CACHED") != 10 {
		t.Errorf("rebuild not all cached (%d of 10: 9 steps and the start):\n%s", strings.Count(out, "CACHED"), out)
	}

	// Tags: name:tag builds are addressed by it; an unknown tag is not.
	if out, errOut, code := c.run(t, "", "template", "build", "--name", "myapp:v2", "--ready-cmd", ready, "--build-arg", "GREETING=hi", ctxDir); code != 0 {
		t.Fatalf("build with a tag: %s %s", out, errOut)
	}
	for ref, ok := range map[string]bool{"myapp:v2": true, "myapp:default": true, "myapp:nope": false} {
		out, errOut, code := c.run(t, "", "sandbox", "create", "-t", ref)
		if (code == 0) != ok {
			t.Errorf("create -t %s: %d %s %s", ref, code, out, errOut)
		}
		if code == 0 {
			c.run(t, "", "sandbox", "kill", strings.TrimSpace(out))
		} else if !strings.Contains(errOut, `no ready build tagged "nope"`) {
			t.Errorf("unknown tag: %s", errOut)
		}
	}

	// A sandbox of the template: its files, defaults, variables and start command.
	out, errOut, code = c.run(t, "", "sandbox", "create", "-t", "myapp")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("create from myapp: %s %s", out, errOut)
	}
	script := `id -un; pwd; cat greeting.txt main.py; echo $APP_HOME $MODE; stat -c '%U %a' /etc/app/conf.txt; ` +
		`test -f /home/user/made-by-user && echo made; ` + ready + ` && echo serving`
	out, errOut, code = c.run(t, "", "sandbox", "exec", id, "--", script)
	want := "user\n/srv/app\nhi from root in /srv/app\nprint('app')\n/srv/app build test\nuser 640\nmade\nserving\n"
	if code != 0 || out != want {
		t.Errorf("in the sandbox: %q (%s, %d), want %q", out, errOut, code, want)
	}

	// Deleted while the sandbox runs: it goes on; the name is free.
	if out, errOut, code := c.run(t, "", "template", "delete", "myapp"); code != 0 {
		t.Fatalf("delete: %s %s", out, errOut)
	}
	if out, _, code := c.run(t, "", "sandbox", "exec", id, "--", "cat /srv/app/main.py"); code != 0 || out != "print('app')\n" {
		t.Errorf("the sandbox lost its template: %q %d", out, code)
	}
	if _, errOut, code := c.run(t, "", "sandbox", "create", "-t", "myapp"); code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("create from a deleted template: %q %d", errOut, code)
	}
	if out, _, _ := c.run(t, "", "template", "list"); strings.Contains(out, "myapp") || !strings.Contains(out, "base") {
		t.Errorf("list after delete: %s", out)
	}
	c.run(t, "", "sandbox", "kill", id)
}

func TestTemplateBuildFailure(t *testing.T) {
	srv := testutil.StartServer(t, key)
	c := cli{bin: testutil.Binary(t), env: append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY="+key)}
	ctxDir := writeContext(t, "FROM base\nRUN echo fine\nRUN echo about to fail; echo why >&2; exit 7\nRUN echo never\n")
	out, errOut, code := c.run(t, "", "template", "build", "--name", "broken", ctxDir)
	if code == 0 {
		t.Fatalf("a failing RUN built: %s", out)
	}
	if !strings.Contains(errOut, "step 2") || !strings.Contains(errOut, "exit code 7") {
		t.Errorf("error does not name the step and code: %q", errOut)
	}
	if !strings.Contains(out, "about to fail") || !strings.Contains(out, "why") || strings.Contains(out, "never") {
		t.Errorf("log of the failing step:\n%s", out)
	}
	if _, errOut, code := c.run(t, "", "sandbox", "create", "-t", "broken"); code == 0 || !strings.Contains(errOut, "no ready build") {
		t.Errorf("create from a failed template: %q %d", errOut, code)
	}
	// Outside the context: refused before anything is sent.
	ctxDir = writeContext(t, "FROM base\nCOPY ../secret /x\n")
	if _, errOut, code := c.run(t, "", "template", "build", "--name", "escape", ctxDir); code == 0 || !strings.Contains(errOut, "outside the build context") {
		t.Errorf("COPY ../: %q %d", errOut, code)
	}
	os.Symlink("/etc", filepath.Join(ctxDir, "etc-link"))
	os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM base\nCOPY etc-link/hostname /x\n"), 0o644)
	if _, errOut, code := c.run(t, "", "template", "build", "--name", "escape", ctxDir); code == 0 || !strings.Contains(errOut, "not a directory") {
		t.Errorf("COPY through a symlink: %q %d", errOut, code)
	}
}

// TestTemplateFromOCILayout builds from an OCI layout the test writes (the
// server allows local images) and reads the image's files in a sandbox:
// the agent is injected, not part of the image.
func TestTemplateFromOCILayout(t *testing.T) {
	srv := testutil.StartServer(t, key, "--local-images")
	c := cli{bin: testutil.Binary(t), env: append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY="+key)}
	dir := filepath.Join(t.TempDir(), "layout")
	writeLayout(t, dir)
	ctxDir := writeContext(t, "FROM oci:"+dir+":v1\nENV FROM_DOCKERFILE=yes\n")
	if out, errOut, code := c.run(t, "", "template", "build", "--name", "from-layout", ctxDir); code != 0 {
		t.Fatalf("build: %s %s", out, errOut)
	}
	out, errOut, code := c.run(t, "", "sandbox", "create", "-t", "from-layout")
	if code != 0 {
		t.Fatalf("create: %s %s", out, errOut)
	}
	id := strings.TrimSpace(out)
	defer c.run(t, "", "sandbox", "kill", id)
	if out, errOut, _ := c.run(t, "", "sandbox", "cp", id+":/srv/hello.txt", "-"); out != "hello from an OCI layout\n" {
		t.Errorf("the image's file: %q %s", out, errOut)
	}
	if _, errOut, code := c.run(t, "", "sandbox", "cp", id+":/srv/gone.txt", "-"); code == 0 {
		t.Errorf("a whited-out file is readable: %s", errOut)
	}
}

// TestRecipeFirstUse asks for a built-in template on a node whose
// debootstrap is missing: the first use says at once why it cannot be
// built (never that it is being built), for the recipe built on it and a
// Dockerfile FROM it too.
func TestRecipeFirstUse(t *testing.T) {
	srv := testutil.StartServer(t, key, "--debootstrap", "/nonexistent/debootstrap")
	c := cli{bin: testutil.Binary(t), env: append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY="+key)}
	if out, _, _ := c.run(t, "", "template", "list"); !strings.Contains(out, "debian") || !strings.Contains(out, "code-interpreter-v1") {
		t.Errorf("built-in templates not listed:\n%s", out)
	}
	_, errOut, code := c.run(t, "", "sandbox", "create", "-t", "code-interpreter-v1")
	if code == 0 || !strings.Contains(errOut, "debootstrap, which is not installed") || strings.Contains(errOut, "being built") {
		t.Errorf("first use without debootstrap: %d %q", code, errOut)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM debian\nRUN true\n"), 0o644)
	_, errOut, code = c.run(t, "", "template", "build", "--name", "on-debian", "-f", filepath.Join(dir, "Dockerfile"), dir)
	if code == 0 || !strings.Contains(errOut, "debootstrap, which is not installed") || strings.Contains(errOut, "being built") {
		t.Errorf("FROM debian without debootstrap: %d %q", code, errOut)
	}
	_, errOut, code = c.run(t, "", "template", "prepare", "debian")
	if code == 0 || !strings.Contains(errOut, "debootstrap, which is not installed") {
		t.Errorf("prepare without debootstrap: %d %q", code, errOut)
	}
	if _, errOut, code := c.run(t, "", "template", "delete", "debian"); code == 0 {
		t.Errorf("a built-in template was deleted: %s", errOut)
	}
}

// fakeDebootstrap stands in for debootstrap, whose real run needs Debian's
// archive (tests reach no outside address): it says what debootstrap says
// as it starts, then waits for the file release to appear and fails as
// debootstrap does when the archive cannot be reached.
const fakeDebootstrap = `#!/bin/sh
eval target=\${$(($# - 1))}
mkdir -p "$target/etc" && echo fake > "$target/etc/debian_version"
echo "I: Target architecture can be executed"
echo "I: Retrieving InRelease"
echo "I: Resolving dependencies of required packages..."
echo "I: Retrieving libc6 2.36-9"
echo "I: Validating libc6 2.36-9"
while [ ! -e "%s" ]; do sleep 0.1; done
echo "E: Couldn't download packages: libc6"
exit 1
`

// TestPrepareInBackground starts a server as users do (the built-in
// templates prepared from the start): without any request,
// code-interpreter-v1 is being built; the template list tells how far and
// what runs, a create of it says so. desktop, asked for, waits for debian,
// which it starts from, and tells debian's progress as its own; `cove
// template prepare` follows debian's lines; a failed preparation is listed
// as failed with debootstrap's reason.
func TestPrepareInBackground(t *testing.T) {
	program, release := heldProgram(t, fakeDebootstrap)
	srv := testutil.StartServer(t, key, "--debootstrap", program, "--prepare-templates")
	c := cli{bin: testutil.Binary(t), env: append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY="+key)}
	create := func(tpl string) (int, string) {
		code, _, raw := apiDo(t, srv.URL, "POST", "/sandboxes", `{"templateID":"`+tpl+`"}`)
		return code, string(raw)
	}

	progress := regexp.MustCompile(`(?m)^code-interpreter-v1\s.*building (\d+)%`)
	var list string
	testkit.Wait(30*time.Second, func() bool {
		list, _, _ = c.run(t, "", "template", "list")
		return progress.MatchString(list) && strings.Contains(list, "debootstrap: downloading packages")
	})
	if m := progress.FindStringSubmatch(list); m == nil || !regexp.MustCompile(`code-interpreter-v1 is \d+% done, now debootstrap: downloading packages`).MatchString(list) {
		t.Fatalf("code-interpreter-v1 is not listed as being prepared:\n%s", list)
	} else if pct, _ := strconv.Atoi(m[1]); pct < 1 || pct > 20 {
		t.Errorf("code-interpreter-v1 is %d%% done while debootstrap downloads its packages", pct)
	}
	if code, body := create("code-interpreter-v1"); code != 503 || !regexp.MustCompile(`is being prepared .*: \d+% done, now debootstrap: downloading packages`).MatchString(body) {
		t.Errorf("a create while it is prepared: %d %s", code, body)
	}

	// desktop's first use prepares it, through debian.
	if code, body := create("desktop"); code != 503 || !strings.Contains(body, "is being prepared") {
		t.Errorf("desktop's first create: %d %s", code, body)
	}
	testkit.Wait(30*time.Second, func() bool {
		list, _, _ = c.run(t, "", "template", "list")
		return strings.Contains(list, "desktop is") && strings.Contains(list, "now debian: debootstrap: downloading packages")
	})
	if !regexp.MustCompile(`(?m)^debian\s.*building \d+%`).MatchString(list) || !regexp.MustCompile(`(?m)^desktop\s.*waiting \d+%`).MatchString(list) ||
		!regexp.MustCompile(`desktop is \d+% done, now debian: debootstrap: downloading packages`).MatchString(list) {
		t.Errorf("debian is not listed as being built for desktop:\n%s", list)
	}
	if code, body := create("desktop"); code != 503 || !regexp.MustCompile(`is being prepared .*: \d+% done, now debian: debootstrap: downloading packages`).MatchString(body) {
		t.Errorf("a create of desktop while debian is built: %d %s", code, body)
	}

	// prepare follows each to its end: debian's lines, then the failure.
	go func() {
		time.Sleep(time.Second)
		os.WriteFile(release, nil, 0o644)
	}()
	out, errOut, code := c.run(t, "", "template", "prepare", "desktop")
	if code == 0 || !strings.Contains(out, "debian: I: Retrieving libc6") || !strings.Contains(errOut+out, "debootstrap bookworm") {
		t.Errorf("prepare desktop: %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = c.run(t, "", "template", "prepare", "code-interpreter-v1")
	if code == 0 || !strings.Contains(errOut+out, "debootstrap trixie") {
		t.Errorf("prepare code-interpreter-v1: %d\n%s\n%s", code, out, errOut)
	}
	list, _, _ = c.run(t, "", "template", "list")
	for _, name := range []string{"code-interpreter-v1", "desktop"} {
		if !regexp.MustCompile(`(?m)^`+name+`\s.*error\s`).MatchString(list) || strings.Contains(list, "%") {
			t.Errorf("a failed preparation of %s:\n%s", name, list)
		}
	}
	// debootstrap's tmpfs is gone with it.
	if left, _ := filepath.Glob(filepath.Join(srv.DataDir, "templates", "layers", ".debootstrap-*")); len(left) > 0 {
		t.Errorf("left after a failed debootstrap: %v", left)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), srv.DataDir) {
		t.Errorf("mounts left under the data directory:\n%s", mounts)
	}
}

// waitingDebootstrap runs the real debootstrap once the file release
// appears: the test's archive is served only after the server starts (the
// fake internet comes after its network).
const waitingDebootstrap = `#!/bin/sh
while [ ! -e "%s" ]; do sleep 0.1; done
exec debootstrap "$@"
`

// heldProgram writes script (a format with one %s: the release file's
// path) as a program and returns it and the file that releases it.
func heldProgram(t *testing.T, script string) (program, release string) {
	t.Helper()
	dir := t.TempDir()
	release, program = filepath.Join(dir, "release"), filepath.Join(dir, "debootstrap")
	if err := os.WriteFile(program, []byte(fmt.Sprintf(script, release)), 0o755); err != nil {
		t.Fatal(err)
	}
	return program, release
}

// createsAlong creates and deletes a sandbox of base every 500 ms, through
// urls in turn, until the function it returns is called (or the test
// ends); that returns the creates that failed.
func createsAlong(t *testing.T, urls ...string) (stop func() []string) {
	done := make(chan struct{})
	var once sync.Once
	var failed []string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(500 * time.Millisecond):
			}
			url := urls[i%len(urls)]
			code, m, raw := apiDo(t, url, "POST", "/sandboxes", `{"templateID":"base","timeout":30}`)
			if code != 201 {
				failed = append(failed, fmt.Sprintf("%d %s", code, raw))
				continue
			}
			apiDo(t, url, "DELETE", "/sandboxes/"+m["sandboxID"].(string), "")
		}
	}()
	stop = func() []string {
		once.Do(func() { close(done); wg.Wait() })
		return failed
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestDebianRecipe: with --base=debian, base is the host's template until
// E2B's base — the debian recipe, built end to end (debootstrap, its
// apt-get step through the package cache, E2B's user) from the tests' own
// Debian archive on the fake internet (make deps captured it: nothing
// reaches Debian's) — is ready and warm, then that; creates of base go on
// meanwhile and none fails. The host's template stays host, and by its id
// for what was made from it before (a paused sandbox resumes on it); a
// restart hands base over at once. A sandbox of base then has what E2B's
// base has.
func TestDebianRecipe(t *testing.T) {
	program, release := heldProgram(t, waitingDebootstrap)
	srv := testutil.StartProc(t, key, "--network=true", "--network-range", "198.18.246.0/24", "--debian-mirror", testutil.DebianArchiveURL,
		"--base=debian", "--debootstrap", program)
	archive := testutil.ServeDebianArchive(t, testutil.FakeInternet(t)) // after the server's network
	c := cli{bin: testutil.Binary(t), env: append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY="+key)}
	create := func(tpl string) (id, templateID string) {
		t.Helper()
		code, m, raw := apiDo(t, srv.URL, "POST", "/sandboxes", `{"templateID":"`+tpl+`","timeout":300}`)
		if code != 201 {
			t.Fatalf("create %s: %d %s", tpl, code, raw)
		}
		return m["sandboxID"].(string), m["templateID"].(string)
	}
	exec := func(id, cmd string) string {
		t.Helper()
		out, errOut, code := c.run(t, "", "sandbox", "exec", id, "--", cmd)
		if code != 0 {
			t.Errorf("%s: %q %q %d", cmd, out, errOut, code)
		}
		return out
	}

	// Before: base is the host's template, which a paused sandbox keeps.
	old, tpl := create("base")
	if tpl != template.BaseName {
		t.Fatalf("base before the debian recipe is ready: template %s", tpl)
	}
	exec(old, "echo kept > /home/user/kept")
	if out, errOut, code := c.run(t, "", "sandbox", "pause", "--no-memory", old); code != 0 {
		t.Fatalf("pause: %s %s", out, errOut)
	}

	// Creates of base all along the build and the hand-over.
	stop := createsAlong(t, srv.URL)
	os.WriteFile(release, nil, 0o644)
	testkit.Wait(5*time.Minute, func() bool {
		_, m, _ := apiDo(t, srv.URL, "GET", "/templates/base", "")
		return m["templateID"] == "debian" || m["buildStatus"] == "error"
	})
	for _, f := range stop() {
		t.Errorf("a create of base during the hand-over failed: %s", f)
	}
	for _, p := range archive.Missing() {
		if strings.HasSuffix(p, ".deb") || strings.HasSuffix(p, "Release") || strings.HasSuffix(p, "Packages.xz") {
			t.Errorf("the archive lacks %s (scripts/debian-archive.sh captures too little)", p)
		}
	}
	if _, m, raw := apiDo(t, srv.URL, "GET", "/templates/base", ""); m["templateID"] != "debian" {
		out, _, _ := c.run(t, "", "template", "prepare", "debian")
		t.Fatalf("base was not handed to the debian recipe: %s\n%s", raw, lastLines(out, 30))
	}
	if out, _, _ := c.run(t, "", "template", "list"); !regexp.MustCompile(`(?m)^base\s+host\s+ready`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^debian\s+base,debian\s+ready`).MatchString(out) {
		t.Errorf("the list after the hand-over:\n%s", out)
	}

	// After: base is E2B's base; host is the host's template, which the
	// paused sandbox resumes on.
	id, tpl := create("base")
	defer c.run(t, "", "sandbox", "kill", id)
	if tpl != "debian" {
		t.Errorf("base after the hand-over: template %s", tpl)
	}
	for _, check := range []struct{ cmd, want string }{
		{"whoami; pwd; id -u", "user\n/home/user\n1000\n"},
		{"python --version; python3 -c 'import sys; print(sys.version_info[:2])'", "Python 3.11"},
		{"node -e 'console.log(process.version.split(\".\")[0])'; npm --version >/dev/null && yarn --version >/dev/null && echo npm yarn", "npm yarn\n"},
		{"git --version >/dev/null && curl --version >/dev/null && gcc --version >/dev/null && make --version >/dev/null && tput -T xterm cols >/dev/null && echo tools", "tools\n"},
		{"sudo -n true && sudo -n whoami", "root\n"},
		{"test -d /code && test -w /code && echo code", "code\n"},
	} {
		if out := exec(id, check.cmd); !strings.Contains(out, check.want) {
			t.Errorf("%s: %q, want %q in it", check.cmd, out, check.want)
		}
	}
	if _, tpl := create("host"); tpl != template.BaseName {
		t.Errorf("host: template %s", tpl)
	}
	if out, errOut, code := c.run(t, "", "sandbox", "resume", old); code != 0 {
		t.Fatalf("resume: %s %s", out, errOut)
	}
	if out := exec(old, "cat /home/user/kept"); out != "kept\n" {
		t.Errorf("the sandbox paused before: %q", out)
	}
	if _, m, _ := apiDo(t, srv.URL, "GET", "/sandboxes/"+old, ""); m["templateID"] != template.BaseName {
		t.Errorf("the sandbox paused before resumed on %v", m["templateID"])
	}

	// A restart: base is E2B's base from the start.
	srv.Restart(false)
	if id, tpl := create("base"); tpl != "debian" {
		t.Errorf("base after a restart: template %s", tpl)
	} else {
		c.run(t, "", "sandbox", "kill", id)
	}
}

// apiDo calls the API at url with the test's key.
func apiDo(t *testing.T, url, method, path, body string) (int, map[string]any, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, raw
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestTemplateCancel: cove template cancel stops a build that
// `cove template build` follows: the build fails saying it was cancelled,
// and cancelling it again says it has ended.
func TestTemplateCancel(t *testing.T) {
	srv := testutil.StartServer(t, key)
	c := cli{bin: testutil.Binary(t), env: append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY="+key)}
	ctxDir := writeContext(t, "FROM base\nRUN echo sleeping; sleep 600\n")
	type result struct {
		out, errOut string
		code        int
	}
	built := make(chan result, 1)
	go func() {
		out, errOut, code := c.run(t, "", "template", "build", "--name", "sleepy", ctxDir)
		built <- result{out, errOut, code}
	}()
	testkit.Eventually(t, 2*time.Minute, func() error {
		if out, _, _ := c.run(t, "", "template", "list"); !regexp.MustCompile(`sleepy\s+building`).MatchString(out) {
			return fmt.Errorf("the build does not run yet:\n%s", out)
		}
		return nil
	})
	if out, errOut, code := c.run(t, "", "template", "cancel", "sleepy"); code != 0 || !strings.Contains(out, "cancelled build") {
		t.Fatalf("cancel: %q %q %d", out, errOut, code)
	}
	select {
	case r := <-built:
		if r.code == 0 || !strings.Contains(r.errOut, "cancelled: the team cancelled the build") {
			t.Errorf("the followed build after the cancel: %d %q", r.code, r.errOut)
		}
	case <-time.After(time.Minute):
		t.Fatal("cove template build still follows the cancelled build")
	}
	if _, errOut, code := c.run(t, "", "template", "cancel", "sleepy"); code == 0 || !strings.Contains(errOut, "has ended already") {
		t.Errorf("cancel again: %q %d", errOut, code)
	}
	if _, errOut, code := c.run(t, "", "template", "cancel", "no-such"); code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("cancel of no template: %q %d", errOut, code)
	}
}

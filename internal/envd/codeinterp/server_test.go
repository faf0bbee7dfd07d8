package codeinterp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/envd"
)

// testServer is a code interpreter over a real agent (envd) whose access
// token is "secret" and whose environment has SANDBOX_VAR.
type testServer struct {
	url   string
	agent string
	srv   *Server
}

func startServer(t *testing.T, defaults ...string) *testServer {
	t.Helper()
	return startServerWith(t, func(c *Config) { c.Defaults = defaults })
}

func startServerWith(t *testing.T, configure func(*Config)) *testServer {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	agent := httptest.NewServer(envd.New(envd.Config{}, log))
	t.Cleanup(agent.Close)
	resp, err := http.Post(agent.URL+"/init", "application/json", strings.NewReader(`{"accessToken":"secret","envVars":{"SANDBOX_VAR":"from-the-sandbox"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	dir := t.TempDir()
	cfg := Config{Agent: agent.URL, Cwd: dir, Env: append(os.Environ(), "HOME="+dir)}
	configure(&cfg)
	s, err := New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &testServer{url: srv.URL, agent: agent.URL, srv: s}
}

// execution is what an /execute streamed.
type execution struct {
	status int
	body   string
	lines  []map[string]any
}

func (e execution) of(typ string) []map[string]any {
	var out []map[string]any
	for _, l := range e.lines {
		if l["type"] == typ {
			out = append(out, l)
		}
	}
	return out
}

func (e execution) text(typ string) string {
	var b strings.Builder
	for _, l := range e.of(typ) {
		s, _ := l["text"].(string)
		b.WriteString(s)
	}
	return b.String()
}

func (s *testServer) execute(t *testing.T, body string, token string) execution {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url+"/execute", strings.NewReader(body))
	if token != "" {
		req.Header.Set("X-Access-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	e := execution{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		e.body = string(b)
		return e
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		e.lines = append(e.lines, m)
	}
	return e
}

func code(c string) string {
	b, _ := json.Marshal(map[string]string{"code": c})
	return string(b)
}

func TestPython(t *testing.T) {
	s := startServer(t, "python")
	run := func(c string) execution { return s.execute(t, code(c), "secret") }
	if e := run("x = 41"); len(e.of("error")) > 0 {
		t.Fatalf("x = 41: %v", e.lines)
	}
	e := run("x + 1")
	if r := e.of("result"); len(r) != 1 || r[0]["text"] != "42" || r[0]["is_main_result"] != true {
		t.Errorf("x + 1: %v", e.lines)
	}
	if n := e.of("number_of_executions"); len(n) != 1 || n[0]["execution_count"] != float64(2) {
		t.Errorf("execution count: %v", e.lines)
	}
	if e := run("print('hi')\nimport sys; print('oops', file=sys.stderr)"); e.text("stdout") != "hi\n" || e.text("stderr") != "oops\n" {
		t.Errorf("print: %v", e.lines)
	}
	if e := run("1/0"); len(e.of("error")) != 1 || e.of("error")[0]["name"] != "ZeroDivisionError" {
		t.Errorf("1/0: %v", e.lines)
	}
	if e := run("    if True:\n        y = 'indented'\n    y"); e.of("result") == nil || e.of("result")[0]["text"] != "indented" {
		t.Errorf("indented code: %v", e.lines)
	}
	if e := run("import os; os.environ['SANDBOX_VAR']"); e.of("result") == nil || e.of("result")[0]["text"] != "from-the-sandbox" {
		t.Errorf("sandbox environment: %v", e.lines)
	}
	e = s.execute(t, `{"code":"import os; os.environ['REQ_VAR']","env_vars":{"REQ_VAR":"from-the-request"}}`, "secret")
	if e.of("result") == nil || e.of("result")[0]["text"] != "from-the-request" {
		t.Errorf("request environment: %v", e.lines)
	}
	if e := run("import os; os.environ.get('REQ_VAR', 'gone')"); e.of("result") == nil || e.of("result")[0]["text"] != "gone" {
		t.Errorf("request environment after the request: %v", e.lines)
	}
}

func TestJavaScript(t *testing.T) {
	s := startServer(t)
	run := func(c, lang string) execution {
		b, _ := json.Marshal(map[string]string{"code": c, "language": lang})
		return s.execute(t, string(b), "secret")
	}
	for _, tc := range []struct {
		name, lang, code string
		check            func(e execution) bool
	}{
		{"state", "js", "const x = 41", func(e execution) bool { return len(e.of("error")) == 0 }},
		{"state kept", "javascript", "x + 1", func(e execution) bool { return len(e.of("result")) == 1 && e.of("result")[0]["text"] == "42" }},
		{"console", "js", "console.log('hi'); console.error('oops')", func(e execution) bool { return e.text("stdout") == "hi\n" && e.text("stderr") == "oops\n" }},
		{"top-level await", "js", "await new Promise(r => setTimeout(() => r(7), 10))", func(e execution) bool { return e.of("result")[0]["text"] == "7" }},
		{"import", "js", "import path from 'node:path'\nimport { join } from 'node:path'\njoin('a', path.basename('/x/b'))", func(e execution) bool { return e.of("result")[0]["text"] == "a/b" }},
		{"error", "js", "throw new TypeError('bad')", func(e execution) bool {
			return len(e.of("error")) == 1 && e.of("error")[0]["name"] == "TypeError" && e.of("error")[0]["value"] == "bad"
		}},
		{"typescript", "ts", "const n: number = 2\nfunction twice(v: number): number { return v * 2 }\ntwice(n)", func(e execution) bool { return e.of("result")[0]["text"] == "4" }},
		{"environment", "js", "process.env.SANDBOX_VAR", func(e execution) bool { return e.of("result")[0]["text"] == "from-the-sandbox" }},
	} {
		e := run(tc.code, tc.lang)
		if e.status != 200 || !func() (ok bool) {
			defer func() {
				if recover() != nil {
					ok = false
				}
			}()
			return tc.check(e)
		}() {
			t.Errorf("%s: %d %s %v", tc.name, e.status, e.body, e.lines)
		}
	}
}

func TestBash(t *testing.T) {
	s := startServer(t)
	run := func(c string) execution {
		b, _ := json.Marshal(map[string]string{"code": c, "language": "bash"})
		return s.execute(t, string(b), "secret")
	}
	if e := run("X=kept; cd /; echo -n partial"); e.text("stdout") != "partial" {
		t.Errorf("first cell: %v", e.lines)
	}
	if e := run("echo $X $(pwd); echo err >&2"); e.text("stdout") != "kept /\n" || e.text("stderr") != "err\n" {
		t.Errorf("state: %v", e.lines)
	}
	if e := run("echo \"unclosed"); len(e.lines) == 0 || e.of("stderr") == nil {
		t.Errorf("a syntax error: %v", e.lines)
	}
	if e := run("echo $SANDBOX_VAR"); e.text("stdout") != "from-the-sandbox\n" {
		t.Errorf("environment: %v", e.lines)
	}
	if e := run("exec >/dev/null; echo hidden"); len(e.of("end_of_execution")) != 1 {
		t.Errorf("a cell that moves its output: %v", e.lines)
	}
}

func TestR(t *testing.T) {
	s := startServer(t)
	run := func(c string) execution {
		b, _ := json.Marshal(map[string]string{"code": c, "language": "r"})
		return s.execute(t, string(b), "secret")
	}
	run("x <- 41")
	if e := run("x + 1"); e.of("result") == nil || e.of("result")[0]["text"] != "[1] 42" {
		t.Errorf("state: %v", e.lines)
	}
	if e := run(`cat(Sys.getenv("SANDBOX_VAR"))`); e.text("stdout") != "from-the-sandbox" {
		t.Errorf("environment: %v", e.lines)
	}
	if e := run(`stop("bad")`); len(e.of("error")) != 1 {
		t.Errorf("error: %v", e.lines)
	}
	// IRkernel shows each top-level value as a display: the last is the
	// execution's main result, as Python's last expression is, written
	// after the plots.
	for _, c := range []struct {
		code  string
		texts []string
		main  string
	}{
		{"1 + 1", []string{"[1] 2"}, "[1] 2"},
		{"x; 2", []string{"[1] 41", "[1] 2"}, "[1] 2"},
		{"plot(1:3); 5", []string{"plot without title", "[1] 5"}, "[1] 5"},
		{"5; plot(1:3)", []string{"plot without title", "[1] 5"}, "[1] 5"},
		{"y <- 1", nil, ""},
	} {
		e := run(c.code)
		var texts []string
		main := ""
		for _, r := range e.of("result") {
			texts = append(texts, r["text"].(string))
			if r["is_main_result"] == true {
				if main != "" {
					t.Errorf("%s: two main results: %v", c.code, e.lines)
				}
				main = r["text"].(string)
			}
		}
		if !slices.Equal(texts, c.texts) || main != c.main {
			t.Errorf("%s: results %q, main %q; want %q, main %q", c.code, texts, main, c.texts, c.main)
		}
	}
}

func TestJava(t *testing.T) {
	// The server's environment has the sandbox's variables, as the agent
	// gives them to every process it starts.
	s := startServerWith(t, func(c *Config) { c.Env = append(c.Env, "SANDBOX_VAR=from-the-sandbox") })
	run := func(c string, env map[string]string) execution {
		b, _ := json.Marshal(map[string]any{"code": c, "language": "java", "env_vars": env})
		return s.execute(t, string(b), "secret")
	}
	if e := run("import java.util.*;\nint x = 41;\nList<Integer> l = new ArrayList<>();", nil); len(e.of("error")) > 0 {
		t.Fatalf("declarations: %v", e.lines)
	}
	if e := run("l.add(x + 1);\nSystem.out.println(\"out \" + l);\nx + 1", nil); e.text("stdout") != "out [42]\n" || e.of("result") == nil || e.of("result")[0]["text"] != "42" {
		t.Errorf("state: %v", e.lines)
	}
	if e := run(`System.getenv("REQ") + " " + System.getProperty("REQ") + " " + System.getenv("SANDBOX_VAR") + " " + System.getProperty("SANDBOX_VAR")`, map[string]string{"REQ": "r"}); e.of("result") == nil || e.of("result")[0]["text"] != "r r from-the-sandbox from-the-sandbox" {
		t.Errorf("environment: %v", e.lines)
	}
	if e := run(`System.getenv("REQ")`, nil); e.of("result") == nil || e.of("result")[0]["text"] != "null" {
		t.Errorf("the request's environment after it: %v", e.lines)
	}
	if e := run(`throw new IllegalStateException("bad");`, nil); len(e.of("error")) != 1 || e.of("error")[0]["name"] != "IllegalStateException" {
		t.Errorf("exception: %v", e.lines)
	}
	if e := run(`int y = "no";`, nil); len(e.of("error")) != 1 || e.of("error")[0]["name"] != "CompilationException" {
		t.Errorf("compile error: %v", e.lines)
	}
}

func TestPythonRichResults(t *testing.T) {
	s := startServer(t, "python")
	run := func(c string) execution { return s.execute(t, code(c), "secret") }
	chartOf := func(e execution) map[string]any {
		for _, r := range e.of("result") {
			if c, ok := r["chart"].(map[string]any); ok {
				return c
			}
		}
		t.Errorf("no chart in %v", e.lines)
		return map[string]any{}
	}
	run("import matplotlib.pyplot as plt")
	for _, tc := range []struct {
		name, code, kind string
		check            func(c map[string]any) bool
	}{
		{"line", "plt.figure(); plt.plot([1, 2, 3], [2, 4, 9], label='sq'); plt.title('T'); plt.xlabel('time (s)'); plt.yscale('log')", "line", func(c map[string]any) bool {
			el := c["elements"].([]any)[0].(map[string]any)
			return c["title"] == "T" && c["x_unit"] == "s" && c["y_scale"] == "log" && el["label"] == "sq" && len(el["points"].([]any)) == 3
		}},
		{"scatter", "plt.figure(); plt.scatter([1, 2], [3, 4])", "scatter", func(c map[string]any) bool {
			return len(c["elements"].([]any)[0].(map[string]any)["points"].([]any)) == 2 && c["title"] == nil && c["x_label"] == nil
		}},
		{"bar", "plt.figure(); plt.bar(['a', 'b'], [3, 5])", "bar", func(c map[string]any) bool {
			el := c["elements"].([]any)
			return len(el) == 2 && el[1].(map[string]any)["label"] == "b" && el[1].(map[string]any)["value"] == float64(5)
		}},
		{"pie", "plt.figure(); plt.pie([1, 3], labels=['x', 'y'])", "pie", func(c map[string]any) bool {
			el := c["elements"].([]any)
			return len(el) == 2 && el[1].(map[string]any)["label"] == "y" && el[1].(map[string]any)["angle"] == float64(270)
		}},
		{"box", "plt.figure(); plt.boxplot([[1, 2, 3, 4, 5, 40]], labels=['g'])", "box_and_whisker", func(c map[string]any) bool {
			el := c["elements"].([]any)[0].(map[string]any)
			return el["label"] == "g" && el["median"] == 3.5 && len(el["outliers"].([]any)) == 1
		}},
		{"box with patches", "data = {'A': [85, 90, 78, 92, 88], 'B': [95, 89, 76, 91, 84, 87], 'C': [75, 82, 88, 79, 86]}\n" +
			"fig, ax = plt.subplots(); ax.boxplot(data.values(), labels=data.keys(), patch_artist=True); ax.set_xlabel('Class')", "box_and_whisker", func(c map[string]any) bool {
			got := map[string][]any{}
			for _, e := range c["elements"].([]any) {
				el := e.(map[string]any)
				for _, k := range []string{"label", "outliers", "min", "first_quartile", "median", "third_quartile", "max"} {
					got[k] = append(got[k], el[k])
				}
			}
			want := map[string][]any{"label": {"A", "B", "C"}, "outliers": {[]any{}, []any{76.0}, []any{}}, "min": {78.0, 84.0, 75.0},
				"first_quartile": {85.0, 84.75, 79.0}, "median": {88.0, 88.0, 82.0}, "third_quartile": {90.0, 90.5, 86.0}, "max": {92.0, 95.0, 88.0}}
			return reflect.DeepEqual(got, want) && c["x_label"] == "Class" && c["y_label"] == nil && c["title"] == nil
		}},
		{"pie's angles", "plt.figure(); plt.pie([90, 10], labels=['no', 'yes'], startangle=90)", "pie", func(c map[string]any) bool {
			el := c["elements"].([]any)
			return el[0].(map[string]any)["angle"] == float64(324) && el[1].(map[string]any)["angle"] == float64(36) && el[0].(map[string]any)["radius"] == float64(1)
		}},
		{"categorical", "plt.figure(); plt.plot(['a', 'b'], [1, 2])", "line", func(c map[string]any) bool {
			p := c["elements"].([]any)[0].(map[string]any)["points"].([]any)
			return c["x_scale"] == "categorical" && p[1].([]any)[0] == "b" && p[1].([]any)[1] == float64(2)
		}},
		{"datetime", "import datetime\nplt.figure(); plt.plot([datetime.date(2024, 1, 1), datetime.date(2024, 1, 2)], [1, 2])", "line", func(c map[string]any) bool {
			p := c["elements"].([]any)[0].(map[string]any)["points"].([]any)
			return c["x_scale"] == "datetime" && strings.HasPrefix(p[0].([]any)[0].(string), "2024-01-01")
		}},
		{"superchart", "fig, (a, b) = plt.subplots(1, 2); a.plot([1, 2]); b.bar(['u'], [1]); fig.suptitle('S')", "superchart", func(c map[string]any) bool {
			el := c["elements"].([]any)
			return c["title"] == "S" && len(el) == 2 && el[1].(map[string]any)["type"] == "bar" && el[0].(map[string]any)["x_label"] == nil
		}},
		{"superchart untitled", "fig, (a, b) = plt.subplots(1, 2); a.plot([1, 2]); b.plot([3, 4])", "superchart", func(c map[string]any) bool {
			return c["title"] == nil
		}},
	} {
		e := run(tc.code)
		c := chartOf(e)
		if c["type"] != tc.kind || !func() (ok bool) {
			defer func() { ok = ok && recover() == nil }()
			return tc.check(c)
		}() {
			t.Errorf("%s: %v", tc.name, c)
		}
	}
	e := run("import pandas as pd\npd.DataFrame({'a': [1, 2]})")
	if r := e.of("result"); len(r) != 1 || r[0]["html"] == nil || r[0]["data"] == nil || r[0]["extra"] != nil {
		t.Errorf("DataFrame: %v", e.lines)
	}
	e = run("from IPython.display import display, HTML, Markdown, Latex, JSON, SVG\n" +
		"display(HTML('<b>h</b>'), Markdown('*m*'), Latex('$x$'), JSON({'k': 1}), SVG('<svg xmlns=\"http://www.w3.org/2000/svg\"/>'))")
	if r := e.of("result"); len(r) != 5 || r[0]["html"] != "<b>h</b>" || r[1]["markdown"] != "*m*" || r[2]["latex"] != "$x$" ||
		r[3]["json"] == nil || r[4]["svg"] == nil {
		t.Errorf("display: %v", e.lines)
	} else {
		for _, x := range r {
			if x["extra"] != nil {
				t.Errorf("a stray MIME type: %v", x)
			}
		}
	}
	e = run("from PIL import Image\nImage.new('RGB', (4, 4)).show()")
	if r := e.of("result"); len(r) != 1 || r[0]["png"] == nil {
		t.Errorf("PIL show: %v", e.lines)
	}
	e = run("import io\nim = Image.new('RGB', (4, 4))\nim.save('saved.png')\nim.save(io.BytesIO(), 'PNG')")
	if r := e.of("result"); len(r) != 1 || r[0]["png"] == nil {
		t.Errorf("PIL save, to a file then to memory: %v, want one PNG", e.lines)
	}
}

func TestBadInput(t *testing.T) {
	s := startServer(t, "python")
	big, _ := json.Marshal(map[string]string{"code": "x = 1\n" + strings.Repeat("#", 10<<20)})
	for _, tc := range []struct {
		name, body, token string
		status            int
		text              string
	}{
		{"no token", code("1"), "", 401, "access token"},
		{"a wrong token", code("1"), "wrong", 401, "access token"},
		{"malformed JSON", `{"code": `, "secret", 400, "invalid JSON"},
		{"code not a string", `{"code": 42}`, "secret", 400, "code must be a string"},
		{"no code", `{}`, "secret", 400, "code must be a string"},
		{"context and language", `{"code": "1", "context_id": "x", "language": "python"}`, "secret", 400, "Only one of context_id or language"},
		{"unknown context", `{"code": "1", "context_id": "nope"}`, "secret", 404, "Context nope not found"},
		{"unknown language", `{"code": "1", "language": "cobol"}`, "secret", 400, "python, javascript, typescript, r, java, bash"},
		{"bad variable name", `{"code": "1", "env_vars": {"A B": "x"}}`, "secret", 400, "not a valid variable name"},
		{"too large", `{"code": "` + strings.Repeat("a", 17<<20) + `"}`, "secret", 413, "larger than"},
		{"10 MB of code", string(big), "secret", 200, ""},
	} {
		e := s.execute(t, tc.body, tc.token)
		if e.status != tc.status || !strings.Contains(e.body, tc.text) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, e.status, e.body, tc.status, tc.text)
		}
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"context of an unknown language", "POST", "/contexts", `{"language": "cobol"}`, 400},
		{"context in a missing directory", "POST", "/contexts", `{"cwd": "/nonexistent"}`, 400},
		{"restart an unknown context", "POST", "/contexts/nope/restart", "", 404},
		{"delete an unknown context", "DELETE", "/contexts/nope", "", 404},
	} {
		if status, body := s.call(t, tc.method, tc.path, tc.body, "secret"); status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.status)
		}
	}
}

// call makes one request with token ("" for none) and returns its status
// and body.
func (s *testServer) call(t *testing.T, method, path, body, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("X-Access-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTokenFirst: without the sandbox's access token no code runs and no
// kernel starts. The official SDK sends the token on /execute only: the
// context calls take none (a wrong one is refused) and start no kernel; a
// context's kernel starts at its first execution, which needs the token.
// Past MaxContexts a context is refused with a clear 429 until one is
// removed.
func TestTokenFirst(t *testing.T) {
	s := startServerWith(t, func(c *Config) { c.MaxContexts = 2 })
	kernels := func() int {
		n := 0
		for _, c := range s.srv.ctxs.list() {
			if c.kernel() != nil {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		name, method, path, body, token string
		want                            int
	}{
		{"execute without a token", "POST", "/execute", code("1"), "", 401},
		{"execute with a wrong token", "POST", "/execute", `{"code": "1", "language": "bash"}`, "wrong", 401},
		{"a context with a wrong token", "POST", "/contexts", `{"language": "bash"}`, "wrong", 401},
		{"contexts listed with a wrong token", "GET", "/contexts", "", "wrong", 401},
		{"a context restarted with a wrong token", "POST", "/contexts/nope/restart", "", "wrong", 401},
		{"a context deleted with a wrong token", "DELETE", "/contexts/nope", "", "wrong", 401},
	} {
		if status, body := s.call(t, tc.method, tc.path, tc.body, tc.token); status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.want)
		}
	}
	if n := len(s.srv.ctxs.list()); n != 0 {
		t.Fatalf("%d contexts after refused requests", n)
	}
	// As the official SDK makes them: no token, no kernel.
	var ids []string
	for range 2 {
		status, body := s.call(t, "POST", "/contexts", `{"language": "python"}`, "")
		var c map[string]string
		if status != 200 || json.Unmarshal([]byte(body), &c) != nil {
			t.Fatalf("create a context: %d %s", status, body)
		}
		ids = append(ids, c["id"])
	}
	if status, body := s.call(t, "POST", "/contexts/"+ids[0]+"/restart", "", ""); status != 200 || kernels() != 0 {
		t.Errorf("restart without a token: %d %s, %d kernels", status, body, kernels())
	}
	if n := kernels(); n != 0 {
		t.Fatalf("%d kernels started without the token", n)
	}
	for _, tc := range []struct{ name, path, body string }{
		{"a third context", "/contexts", `{"language": "bash"}`},
		{"a default context past the cap", "/execute", `{"code": "1", "language": "bash"}`},
	} {
		if status, body := s.call(t, "POST", tc.path, tc.body, "secret"); status != 429 || !strings.Contains(body, "at most 2") {
			t.Errorf("%s: %d %s, want 429 naming the cap", tc.name, status, body)
		}
	}
	// The first execution, with the token, starts the context's kernel.
	e := s.execute(t, `{"code": "x = 40 + 2\nx", "context_id": "`+ids[1]+`"}`, "secret")
	if r := e.of("result"); len(r) != 1 || r[0]["text"] != "42" || kernels() != 1 {
		t.Errorf("the first execution in a context: %v, %d kernels", e.lines, kernels())
	}
	if status, body := s.call(t, "DELETE", "/contexts/"+ids[0], "", ""); status != 200 {
		t.Fatalf("delete a context: %d %s", status, body)
	}
	if status, body := s.call(t, "POST", "/contexts", `{"language": "bash"}`, "secret"); status != 200 {
		t.Errorf("a context once one was removed: %d %s", status, body)
	}
}

func TestKernelFailures(t *testing.T) {
	s := startServerWith(t, func(c *Config) {
		c.Defaults = []string{"python"}
		c.MaxOutputBytes = 1 << 20
		c.InterruptGrace = time.Minute
	})
	run := func(c string) execution { return s.execute(t, code(c), "secret") }

	// Output past the cap is dropped; the client going away interrupts the
	// code. The flood is 8 MB, then a long sleep: an endless one grows
	// without bound in ipykernel's batches (the slower this process reads,
	// the larger each), up to all of the host's memory under -race.
	ctx, cancel := context.WithCancel(context.Background())
	flood := "kept = 1\nfor _ in range(8000): print('x' * 1000)\nimport time\ntime.sleep(3600)"
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/execute", strings.NewReader(code(flood)))
	req.Header.Set("X-Access-Token", "secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, capped := 0, false
	for sc := bufio.NewScanner(resp.Body); !capped && n < 4<<20 && sc.Scan(); {
		n += len(sc.Bytes())
		capped = strings.Contains(sc.Text(), "is dropped")
	}
	cancel()
	resp.Body.Close()
	if !capped || n > 2<<20 {
		t.Errorf("the output was not capped at 1 MiB: %d bytes, capped %v", n, capped)
	}
	if e := run("kept"); e.of("result") == nil || e.of("result")[0]["text"] != "1" {
		t.Errorf("after an interrupted execution: %v", e.lines)
	}

	// A kernel that dies says so, and so does the next execution until
	// the context is restarted.
	e := run("import os\nos._exit(3)")
	if errs := e.of("error"); len(errs) != 1 || errs[0]["name"] != "DeadKernelError" {
		t.Errorf("a dying kernel: %v", e.lines)
	}
	if e := run("1"); len(e.of("error")) != 1 {
		t.Errorf("a dead kernel: %v", e.lines)
	}
	var list []map[string]string
	_, body := s.call(t, "GET", "/contexts", "", "secret")
	json.Unmarshal([]byte(body), &list)
	if status, body := s.call(t, "POST", "/contexts/"+list[0]["id"]+"/restart", "", "secret"); status != 200 {
		t.Fatalf("restart: %d %s", status, body)
	}
	if e := run("2 + 2"); e.of("result") == nil || e.of("result")[0]["text"] != "4" {
		t.Errorf("after a restart: %v", e.lines)
	}
}

func TestKeepalive(t *testing.T) {
	s := startServerWith(t, func(c *Config) { c.Defaults = []string{"python"}; c.Keepalive = 100 * time.Millisecond })
	e := s.execute(t, code("import time\ntime.sleep(1.5)"), "secret")
	if len(e.of("keepalive")) == 0 || len(e.of("end_of_execution")) != 1 {
		t.Errorf("1.5 s of silence, keepalives after 100 ms: %v", e.lines)
	}
}

// TestInterruptIgnored: code that ignores the interrupt gets a fresh
// kernel once the grace is over; the next execution runs in it.
func TestInterruptIgnored(t *testing.T) {
	s := startServerWith(t, func(c *Config) { c.Defaults = []string{"python"}; c.InterruptGrace = 300 * time.Millisecond })
	s.execute(t, code("kept = 1"), "secret")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/execute",
		strings.NewReader(code("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('deaf', flush=True)\ntime.sleep(60)")))
	req.Header.Set("X-Access-Token", "secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	for sc := bufio.NewScanner(resp.Body); sc.Scan() && !strings.Contains(sc.Text(), "deaf"); {
	}
	cancel()
	resp.Body.Close()
	e := s.execute(t, code("'kept' in globals()"), "secret") // waits for the replaced kernel
	if r := e.of("result"); len(r) != 1 || r[0]["text"] != "False" {
		t.Errorf("after a kernel that ignored the interrupt: %v", e.lines)
	}
}

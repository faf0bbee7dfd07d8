package cove_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeBlock returns the README's code block that follows marker.
func readmeBlock(t *testing.T, marker, lang string) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- "+marker+" -->\n```"+lang+"\n")
	if !ok {
		t.Fatalf("README.md has no block marked %s", marker)
	}
	block, _, _ := strings.Cut(rest, "```")
	return block
}

// TestReadmeGo follows the README's Go quick start as a user does: a new
// module in a directory outside this repository, the setup steps as
// written (with COVE pointing at this checkout and the key the server
// holds), then `go run .` against a real server, which must print node's
// version.
func TestReadmeGo(t *testing.T) {
	client := server(t)
	src := readmeBlock(t, "readme:go", "go")
	setup := readmeBlock(t, "readme:go-setup", "sh")
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cove := regexp.MustCompile(`(?m)^COVE=\S+`)
	if !cove.MatchString(setup) {
		t.Fatalf("the setup no longer sets COVE: %s", setup)
	}
	setup = cove.ReplaceAllLiteralString(setup, "COVE="+checkout)
	exports := regexp.MustCompile(`(?m)^export COVE_API_URL=\S+ COVE_API_KEY=\S+`)
	if !exports.MatchString(setup) {
		t.Fatalf("the setup no longer exports COVE_API_URL and COVE_API_KEY: %s", setup)
	}
	setup = exports.ReplaceAllLiteralString(setup, "export COVE_API_URL="+client.APIURL()+" COVE_API_KEY="+testKey)

	dir := t.TempDir() // outside the repository: no go.work or module of ours around it
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-e", "-c", setup)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "GOFLAGS=", "GOWORK=")
	for _, v := range []string{"GOMODCACHE", "GOCACHE"} { // the machine's, not under the new HOME
		if dir, err := exec.Command("go", "env", v).Output(); err == nil {
			cmd.Env = append(cmd.Env, v+"="+strings.TrimSpace(string(dir)))
		}
	}
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || !strings.HasPrefix(lines[len(lines)-1], "v") {
		t.Errorf("the README's Go quick start: %v\n%s", err, out)
	}
}

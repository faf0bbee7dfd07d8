package cove_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeGo runs the README's Go quick start, as written, against a
// real server: it must compile and print node's version.
func TestReadmeGo(t *testing.T) {
	client := server(t)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- readme:go -->\n```go\n")
	if !ok {
		t.Fatal("README.md has no Go quick start")
	}
	src, _, _ := strings.Cut(rest, "```")
	dir := filepath.Join(".", "readme-snippet.tmp") // inside this module
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "./"+dir)
	cmd.Env = append(os.Environ(), "COVE_API_URL="+client.APIURL(), "COVE_API_KEY="+testKey)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "v") {
		t.Errorf("the README's Go quick start: %v\n%s", err, out)
	}
}

package envd_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/testutil/testkit"
	fspb "github.com/covesandbox/cove/sdk/go/envdpb/filesystem"
)

// tmpfs mounts a small tmpfs at a new directory for the test (flags may
// make it read-only) and unmounts it at the end.
func tmpfs(t *testing.T, size string, flags uintptr) string {
	t.Helper()
	testkit.NeedRoot(t, "needs root to mount a tmpfs")
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, "size="+size); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

func upload(t *testing.T, a *agent, path string, body []byte, headers ...string) (int, string) {
	t.Helper()
	resp := a.post(t, "/files?path="+url.QueryEscape(path), string(body), append([]string{"Content-Type", "application/octet-stream"}, headers...)...)
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// An upload is written in place, as E2B's agent writes it: a full disk or
// a broken stream is the client's answer (507, 4xx); a new file is then
// removed, and nothing is left beside; an existing file stays the same
// file (its mode kept) with what was written of it, as on E2B.
func TestUploadFailures(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	dir := tmpfs(t, "256k", 0)
	var broken bytes.Buffer
	zw := gzip.NewWriter(&broken)
	zw.Write(bytes.Repeat([]byte("y"), 4096))
	zw.Close()
	truncated := broken.Bytes()[:broken.Len()-8]
	fresh := filepath.Join(dir, "new.txt")
	if code, body := upload(t, a, fresh, bytes.Repeat([]byte("x"), 1<<20)); code != 507 || !strings.Contains(body, "no space") {
		t.Errorf("a new file past the disk: %d %s, want 507 no space", code, body)
	}
	if code, body := upload(t, a, fresh, truncated, "Content-Encoding", "gzip"); code < 400 || code >= 500 {
		t.Errorf("a new file from a truncated gzip body: %d %s, want a 4xx", code, body)
	}
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("failed uploads of a new file left %v", names)
	}

	path := filepath.Join(dir, "kept.txt")
	if code, body := upload(t, a, path, []byte("old content")); code != 200 {
		t.Fatalf("first upload: %d %s", code, body)
	}
	os.Chmod(path, 0o600)
	if code, body := upload(t, a, path, bytes.Repeat([]byte("x"), 1<<20)); code != 507 || !strings.Contains(body, "no space") {
		t.Errorf("an overwrite past the disk: %d %s, want 507 no space", code, body)
	}
	if code, body := upload(t, a, path, truncated, "Content-Encoding", "gzip"); code < 400 || code >= 500 {
		t.Errorf("an overwrite from a truncated gzip body: %d %s, want a 4xx", code, body)
	}
	if names, _ := os.ReadDir(dir); len(names) != 1 {
		t.Errorf("failed overwrites left files beside: %v", names)
	}
	if code, body := upload(t, a, path, []byte("new")); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("the file holds %.20q…, want new", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("an overwritten file's mode became %v, want 0600", st.Mode().Perm())
	}
}

// Metadata is E2B's: user.e2b.<key> attributes, set by an upload or by
// setfattr inside, shown by stat, gone when the file is overwritten.
func TestFileMetadata(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	dir := tmpfs(t, "1m", 0)
	path := filepath.Join(dir, "f")
	code, body := upload(t, a, path, []byte("1"), "X-Metadata-Author", "alice")
	if code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	var out []struct{ Metadata map[string]string }
	if json.Unmarshal([]byte(body), &out); len(out) != 1 || out[0].Metadata["author"] != "alice" {
		t.Errorf("upload answer %s", body)
	}
	val := make([]byte, 64)
	if n, err := unix.Getxattr(path, "user.e2b.author", val); err != nil || string(val[:n]) != "alice" {
		t.Errorf("user.e2b.author = %q, %v", val[:n], err)
	}
	if err := unix.Setxattr(path, "user.e2b.reviewed", []byte("yes"), 0); err != nil {
		t.Fatal(err)
	}
	st, err := a.fs.Stat(ctx(t), req(&fspb.StatRequest{Path: path}))
	if err != nil {
		t.Fatal(err)
	}
	if m := st.Msg.GetEntry().GetMetadata(); m["author"] != "alice" || m["reviewed"] != "yes" || len(m) != 2 {
		t.Errorf("stat metadata %v", m)
	}
	if code, body := upload(t, a, path, []byte("2")); code != 200 || strings.Contains(body, "metadata") {
		t.Errorf("overwrite: %d %s", code, body)
	}
	st, err = a.fs.Stat(ctx(t), req(&fspb.StatRequest{Path: path}))
	if err != nil || len(st.Msg.GetEntry().GetMetadata()) != 0 {
		t.Errorf("an overwritten file kept metadata: %v %v", st, err)
	}
}

// Writing where the file system is read-only is the user's error, with the
// reason: 403, not 500.
func TestUploadReadOnly(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	dir := tmpfs(t, "64k", unix.MS_RDONLY)
	code, body := upload(t, a, filepath.Join(dir, "f"), []byte("x"))
	if code != 403 || !strings.Contains(body, "read-only") {
		t.Errorf("upload to a read-only file system: %d %s, want 403 naming it", code, body)
	}
	// A running program cannot be written: 409 with the reason.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if code, body := upload(t, a, self, []byte("x")); code != 409 || !strings.Contains(body, "running") {
		t.Errorf("upload onto a running program: %d %s, want 409", code, body)
	}
	_, err = a.fs.MakeDir(ctx(t), req(&fspb.MakeDirRequest{Path: filepath.Join(dir, "d")}))
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("make dir on a read-only file system: %v", err)
	}
}

// Uploads that race to make the same missing parents all succeed: none
// finds a parent made for the user but not yet given to them (the
// official Python SDK's write_files sends a batch's files at once).
func TestConcurrentUploadsMakeParents(t *testing.T) {
	t.Parallel()
	testkit.NeedRoot(t, "needs root to upload as another user")
	a := newAgent(t)
	dir, err := os.MkdirTemp("", "uploads-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // nobody may pass, not write
		t.Fatal(err)
	}
	const rounds, files = 200, 6
	for r := range rounds {
		codes := make(chan string, files)
		for i := range files {
			go func() {
				path := filepath.Join(dir, fmt.Sprint("r", r), "many", fmt.Sprint("f", i))
				resp, err := a.srv.Client().Post(a.srv.URL+"/files?username=nobody&path="+url.QueryEscape(path), "application/octet-stream", strings.NewReader("x"))
				if err != nil {
					codes <- err.Error()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				codes <- fmt.Sprint(resp.StatusCode, " ", strings.TrimSpace(string(b)))
			}()
		}
		for range files {
			if got := <-codes; !strings.HasPrefix(got, "200 ") {
				t.Fatalf("round %d: concurrent upload into new parents: %s", r, got)
			}
		}
	}
}

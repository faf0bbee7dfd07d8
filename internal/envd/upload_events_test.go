package envd_test

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	fspb "github.com/covesandbox/cove/sdk/go/envdpb/filesystem"
)

// uploadMultipart posts body as the SDKs' multipart upload of one file.
func uploadMultipart(t *testing.T, a *agent, path string, body []byte) (int, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	part, err := mw.CreateFormFile("file", path)
	if err != nil {
		t.Fatal(err)
	}
	part.Write(body)
	mw.Close()
	resp := a.post(t, "/files?path="+url.QueryEscape(path), b.String(), "Content-Type", mw.FormDataContentType())
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// TestUploadEvents: an upload, raw or multipart, shows to a watcher as
// E2B's agent's write does — a new file CREATE, CHMOD, WRITE; an existing
// one CHMOD then WRITE (its truncation and its write, which the kernel may
// merge), no CREATE — and it is the same file after: its inode, owner and
// mode stay, set-id bits go.
func TestUploadEvents(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	dir := t.TempDir()
	s, err := a.fs.WatchDir(ctx(t), req(&fspb.WatchDirRequest{Path: dir}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Receive() || s.Msg().GetStart() == nil {
		t.Fatalf("first WatchDir message is not start: %v %v", s.Msg(), s.Err())
	}
	marks := 0
	// events returns what the watcher reported of name up to a mark (a
	// directory made after the upload: the kernel reports in order).
	events := func(name string) string {
		t.Helper()
		marks++
		mark := fmt.Sprint("mark-", marks)
		if err := os.Mkdir(filepath.Join(dir, mark), 0o755); err != nil {
			t.Fatal(err)
		}
		var got []string
		for s.Receive() {
			fe := s.Msg().GetFilesystem()
			switch {
			case fe == nil:
			case fe.GetName() == mark:
				return strings.Join(got, ",")
			case fe.GetName() == name:
				got = append(got, strings.TrimPrefix(fe.GetType().String(), "EVENT_TYPE_"))
			default:
				t.Errorf("the upload of %s reported %v", name, fe)
			}
		}
		t.Fatalf("watch ended: %v", s.Err())
		return ""
	}
	for _, tc := range []struct {
		name string
		send func(t *testing.T, a *agent, path string, body []byte) (int, string)
	}{
		{"raw", func(t *testing.T, a *agent, path string, body []byte) (int, string) { return upload(t, a, path, body) }},
		{"multipart", uploadMultipart},
	} {
		name := tc.name + ".txt"
		path := filepath.Join(dir, name)
		if code, body := tc.send(t, a, path, []byte("first")); code != 200 {
			t.Fatalf("%s: upload: %d %s", tc.name, code, body)
		}
		if got := events(name); got != "CREATE,CHMOD,WRITE" {
			t.Errorf("%s: a new file's upload shows %s, want CREATE,CHMOD,WRITE (E2B's agent's)", tc.name, got)
		}
		if err := os.Chmod(path, os.ModeSetuid|0o750); err != nil {
			t.Fatal(err)
		}
		events(name) // the chmod's
		before, err := os.Stat(path)
		if err != nil || before.Mode()&os.ModeSetuid == 0 {
			t.Fatalf("%s: set-user-id: %v %v", tc.name, before.Mode(), err)
		}
		if code, body := tc.send(t, a, path, []byte("second")); code != 200 {
			t.Fatalf("%s: overwrite: %d %s", tc.name, code, body)
		}
		if got := events(name); got != "CHMOD,WRITE" && got != "CHMOD,WRITE,WRITE" {
			t.Errorf("%s: an overwrite shows %s, want CHMOD,WRITE (E2B's agent's: no CREATE)", tc.name, got)
		}
		after, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != "second" {
			t.Errorf("%s: the file holds %q", tc.name, b)
		}
		if before.Sys().(*syscall.Stat_t).Ino != after.Sys().(*syscall.Stat_t).Ino || after.Mode() != 0o750 {
			t.Errorf("%s: overwritten, the file is inode %d mode %v; it was %d %v (want the same file, set-id bit gone)",
				tc.name, after.Sys().(*syscall.Stat_t).Ino, after.Mode(), before.Sys().(*syscall.Stat_t).Ino, before.Mode())
		}
	}
	if names, _ := os.ReadDir(dir); len(names) != 2+marks {
		t.Errorf("the directory holds %v, want the two files and the marks", names)
	}
}

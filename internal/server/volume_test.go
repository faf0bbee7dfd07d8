package server_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVolumeContentStaysInside: the content API answers inside the
// volume only — a path climbing out, a link a sandbox left pointing at the
// host's files — and another volume's token opens nothing.
func TestVolumeContentStaysInside(t *testing.T) {
	s := start(t)
	code, m, raw := s.do(t, "POST", "/volumes", keyA, `{"name":"inside"}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	id, token := m["volumeID"].(string), m["token"].(string)
	defer s.do(t, "DELETE", "/volumes/"+id, keyA, "")
	_, other, _ := s.do(t, "POST", "/volumes", keyA, `{"name":"other"}`)
	defer s.do(t, "DELETE", "/volumes/"+other["volumeID"].(string), keyA, "")
	// What a sandbox could leave in the volume: links out of it.
	mnt := filepath.Join(s.dataDir, "volumes", "mnt", id)
	if err := os.Symlink("/etc/passwd", filepath.Join(mnt, "abs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../../../etc", filepath.Join(mnt, "rel")); err != nil {
		t.Fatal(err)
	}
	get := func(path, tok string) (int, string) { return volumeContent(t, s.url, "GET", id, tok, path, "") }
	for _, p := range []string{"/file?path=../../../../etc/passwd", "/file?path=abs", "/file?path=rel/passwd", "/dir?path=rel"} {
		code, body := get(p, token)
		if code == 200 || strings.Contains(body, "root:") {
			t.Errorf("GET %s: %d %.80s, want a refusal", p, code, body)
		}
	}
	if code, body := get("/path?path=abs", token); code != 200 || !strings.Contains(body, `"target":"/etc/passwd"`) {
		t.Errorf("stat of the link: %d %s", code, body)
	}
	if code, _ := get("/dir?path=/", other["token"].(string)); code != 401 {
		t.Errorf("another volume's token: %d, want 401", code)
	}
}

// volumeContent calls the content API of volume id at url with token:
// method path (dir|path|file?…), body; the status and the answer.
func volumeContent(t *testing.T, url, method, id, token, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url+"/volumecontent/"+id+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

package envd_test

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/envd/envdwire"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
)

func (a *agent) get(t *testing.T, path string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	r, _ := http.NewRequest(http.MethodGet, a.srv.URL+path, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(r) // what the server sent, not decoded
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestHealthAndInitToken(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	if resp, _ := a.get(t, "/health"); resp.StatusCode != 204 {
		t.Fatalf("health: %s", resp.Status)
	}
	resp := a.post(t, "/init", `{"accessToken":"secret","envVars":{"A":"1"},"defaultUser":"root"}`)
	if resp.StatusCode != 204 || resp.Header.Get("X-Envd-Version") != envdwire.Version {
		t.Fatalf("init: %s %v", resp.Status, resp.Header)
	}
	// From now on the token is required (health stays open).
	tests := []struct {
		name   string
		status int
		do     func() *http.Response
	}{
		{"health without token", 204, func() *http.Response { r, _ := a.get(t, "/health"); return r }},
		{"envs without token", 401, func() *http.Response { r, _ := a.get(t, "/envs"); return r }},
		{"envs with a wrong token", 401, func() *http.Response { r, _ := a.get(t, "/envs", "X-Access-Token", "wrong"); return r }},
		{"envs with the token", 200, func() *http.Response { r, _ := a.get(t, "/envs", "X-Access-Token", "secret"); return r }},
		{"metrics with the token", 200, func() *http.Response { r, _ := a.get(t, "/metrics", "X-Access-Token", "secret"); return r }},
		{"re-init without token", 401, func() *http.Response { return a.post(t, "/init", `{"accessToken":"mine"}`) }},
		{"files without token or signature", 401, func() *http.Response { r, _ := a.get(t, "/files?path=/etc/hostname"); return r }},
	}
	for _, tc := range tests {
		if got := tc.do().StatusCode; got != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.status)
		}
	}
	_, err := a.proc.List(ctx(t), req(&pb.ListRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("RPC without token: %v, want unauthenticated", err)
	}
	if _, err := a.proc.List(ctx(t), req(&pb.ListRequest{}, "X-Access-Token", "secret")); err != nil {
		t.Errorf("RPC with token: %v", err)
	}
	_, body := a.get(t, "/envs", "X-Access-Token", "secret")
	var envs map[string]string
	if err := json.Unmarshal(body, &envs); err != nil || envs["A"] != "1" || envs["E2B_SANDBOX_ID"] != "itest" {
		t.Errorf("envs %s: %v", body, err)
	}
}

func TestFilesUploadDownload(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "sub/dir/hello.txt")

	// Multipart: the part's file name carries the whole destination path.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", target)
	fw.Write([]byte("hello world"))
	mw.Close()
	resp := a.post(t, "/files", buf.String(), "Content-Type", mw.FormDataContentType(), "X-Metadata-Owner", "alice")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("multipart upload: %s %s", resp.Status, body)
	}
	var entries []map[string]any
	if err := json.Unmarshal(body, &entries); err != nil || len(entries) != 1 || entries[0]["path"] != target || entries[0]["type"] != "file" {
		t.Fatalf("upload answer %s", body)
	}
	if meta, _ := entries[0]["metadata"].(map[string]any); meta["owner"] != "alice" {
		t.Errorf("metadata not kept: %s", body)
	}

	// Octet-stream with gzip, to the path query.
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	zw.Write([]byte("compressed body"))
	zw.Close()
	raw := filepath.Join(dir, "raw.bin")
	resp = a.post(t, "/files?path="+url.QueryEscape(raw), zbuf.String(), "Content-Type", "application/octet-stream", "Content-Encoding", "gzip")
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("raw upload: %s %s", resp.Status, b)
	}
	if b, _ := os.ReadFile(raw); string(b) != "compressed body" {
		t.Errorf("raw upload wrote %q", b)
	}

	// Downloads: whole, ranged, gzip, and the error cases.
	resp2, b := a.get(t, "/files?path="+url.QueryEscape(target))
	if resp2.StatusCode != 200 || string(b) != "hello world" || resp2.ContentLength != 11 {
		t.Errorf("download: %s %q %v", resp2.Status, b, resp2.Header)
	}
	resp2, b = a.get(t, "/files?path="+url.QueryEscape(target), "Range", "bytes=6-")
	if resp2.StatusCode != 206 || string(b) != "world" {
		t.Errorf("ranged download: %s %q", resp2.Status, b)
	}
	// gzip where it pays only: text of a size worth it, not a few bytes,
	// not a large body, not random bytes.
	noise := make([]byte, 64<<10)
	rand.Read(noise)
	for _, tc := range []struct {
		name    string
		content []byte
		gzipped bool
	}{
		{"text", bytes.Repeat([]byte("a line of text\n"), 300), true},
		{"a few bytes", []byte("hello world"), false},
		{"large text", bytes.Repeat([]byte("a line of text\n"), 150_000), false},
		{"random bytes", noise, false},
	} {
		p := filepath.Join(dir, "gz-"+strings.ReplaceAll(tc.name, " ", "-"))
		os.WriteFile(p, tc.content, 0o644)
		resp, b := a.get(t, "/files?path="+url.QueryEscape(p), "Accept-Encoding", "gzip")
		if got := resp.Header.Get("Content-Encoding") == "gzip"; got != tc.gzipped {
			t.Errorf("%s (%d bytes): gzipped %v, want %v", tc.name, len(tc.content), got, tc.gzipped)
			continue
		}
		if tc.gzipped {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			b, _ = io.ReadAll(zr)
		} else if resp.ContentLength != int64(len(tc.content)) {
			t.Errorf("%s: raw without its Content-Length: %v", tc.name, resp.Header)
		}
		if !bytes.Equal(b, tc.content) {
			t.Errorf("%s: the download differs", tc.name)
		}
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	if resp2, _ = a.get(t, "/files?path="+url.QueryEscape(empty)); resp2.ContentLength != 0 {
		t.Errorf("empty file download lacks Content-Length: 0: %v", resp2.Header)
	}

	dup := &bytes.Buffer{}
	mw = multipart.NewWriter(dup)
	for range 2 {
		fw, _ := mw.CreateFormFile("file", filepath.Join(dir, "twice"))
		fw.Write([]byte("x"))
	}
	mw.Close()
	errorCases := []struct {
		name   string
		status int
		do     func() int
	}{
		{"download missing", 404, func() int { r, _ := a.get(t, "/files?path="+url.QueryEscape(dir+"/nope")); return r.StatusCode }},
		{"download a directory", 400, func() int { r, _ := a.get(t, "/files?path="+url.QueryEscape(dir)); return r.StatusCode }},
		{"download without path", 400, func() int { r, _ := a.get(t, "/files"); return r.StatusCode }},
		{"upload onto a directory", 400, func() int {
			return a.post(t, "/files?path="+url.QueryEscape(dir), "x", "Content-Type", "application/octet-stream").StatusCode
		}},
		{"raw upload without path", 400, func() int { return a.post(t, "/files", "x", "Content-Type", "application/octet-stream").StatusCode }},
		{"same path twice", 400, func() int {
			return a.post(t, "/files", dup.String(), "Content-Type", mw.FormDataContentType()).StatusCode
		}},
		{"unknown user", 401, func() int {
			r, _ := a.get(t, "/files?username=nosuchuser&path="+url.QueryEscape(target))
			return r.StatusCode
		}},
	}
	for _, tc := range errorCases {
		if got := tc.do(); got != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.status)
		}
	}
}

func TestFilesSignedURLs(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	if resp := a.post(t, "/init", `{"accessToken":"tok"}`); resp.StatusCode != 204 {
		t.Fatal(resp.Status)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	os.WriteFile(path, []byte("signed"), 0o644)
	future := time.Now().Add(time.Minute).Unix()
	past := time.Now().Add(-time.Minute).Unix()
	q := func(op, sig string, exp int64) string {
		v := url.Values{"path": {path}, "signature": {sig}}
		if exp != 0 {
			v.Set("signature_expiration", strconv.FormatInt(exp, 10))
		}
		return "/files?" + v.Encode()
	}
	tests := []struct {
		name   string
		query  string
		status int
	}{
		{"valid", q("read", envdwire.Signature(path, "read", "", "tok", 0), 0), 200},
		{"valid with expiry", q("read", envdwire.Signature(path, "read", "", "tok", future), future), 200},
		{"expired", q("read", envdwire.Signature(path, "read", "", "tok", past), past), 401},
		{"altered expiry", q("read", envdwire.Signature(path, "read", "", "tok", future), future+1), 401},
		{"signed for write", q("read", envdwire.Signature(path, "write", "", "tok", 0), 0), 401},
		{"wrong token", q("read", envdwire.Signature(path, "read", "", "other", 0), 0), 401},
		{"other path", q("read", envdwire.Signature(path+"x", "read", "", "tok", 0), 0), 401},
	}
	for _, tc := range tests {
		if resp, _ := a.get(t, tc.query); resp.StatusCode != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
	}
	w := url.Values{"path": {path}, "signature": {envdwire.Signature(path, "write", "", "tok", 0)}}
	if resp := a.post(t, "/files?"+w.Encode(), "new", "Content-Type", "application/octet-stream"); resp.StatusCode != 200 {
		t.Errorf("signed upload: %s", resp.Status)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("signed upload wrote %q", b)
	}
}

package service

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/template"
)

// TestFilesUpload: an upload link works for its template, hash and team
// until it expires, and for nothing else.
func TestFilesUpload(t *testing.T) {
	st, err := template.NewStore(t.TempDir(), logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ts := NewTemplates(context.Background(), st, nil, nil, []byte("secret"), logx.Discard())
	rec, _, err := st.NewBuild("a", "tpl", nil, 1, 256)
	if err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("0f", 32)
	present, up, err := ts.Files(context.Background(), "a", rec.ID, hash)
	if err != nil || present || up.Team != "a" || time.Until(up.Expires) > FilesLinkTTL {
		t.Fatalf("Files: %v %+v %v", present, up, err)
	}
	if _, _, err := ts.Files(context.Background(), "b", rec.ID, hash); !errs.Is(err, errs.NotFound) {
		t.Errorf("another team asks of the template's files: %v, want NotFound", err)
	}
	expired := up
	expired.Expires = time.Now().Add(-time.Second).Truncate(time.Second)
	expired.Token = ts.filesToken("a", rec.ID, hash, expired.Expires.Unix())
	other := up
	other.Team = "b"
	for _, tc := range []struct {
		name       string
		templateID string
		hash       string
		up         FilesUpload
		want       errs.Kind
	}{
		{"expired, though signed", rec.ID, hash, expired, errs.Unauthenticated},
		{"another team", rec.ID, hash, other, errs.Unauthenticated},
		{"another hash", rec.ID, strings.Repeat("1f", 32), up, errs.Unauthenticated},
		{"another template", "other", hash, up, errs.Unauthenticated},
	} {
		if err := ts.PutFiles(context.Background(), tc.templateID, tc.hash, tc.up, bytes.NewReader([]byte("x"))); !errs.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := ts.PutFiles(context.Background(), rec.ID, hash, up, bytes.NewReader([]byte("x"))); err != nil {
		t.Fatal(err)
	}
	if present, _, err := ts.Files(context.Background(), "a", rec.ID, hash); err != nil || !present {
		t.Errorf("after the upload: %v %v", present, err)
	}
}

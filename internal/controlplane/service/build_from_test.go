package service

import (
	"context"
	"testing"

	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/template"
)

// TestFromTemplate: a build's fromImage that names a template of the
// server's (built-in, or the team's own, with a tag or none) builds on
// that template, whichever client sent it; anything else stays an image.
func TestFromTemplate(t *testing.T) {
	t.Parallel()
	st, err := template.NewStore(t.TempDir(), logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ts := NewTemplates(context.Background(), st, noBuilds{}, nil, []byte("secret"), logx.Discard())
	if _, _, err := st.NewBuild("a", "mine", nil, 1, 256); err != nil {
		t.Fatal(err)
	}
	theirs, _, err := st.NewBuild("b", "theirs", nil, 1, 256)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		image, wantTemplate string
	}{
		{"base", "base"},
		{"code-interpreter-v1", "code-interpreter-v1"},
		{"desktop", "desktop"},
		{"mine", "mine"},
		{"mine:v2", "mine:v2"},
		{"theirs", ""},      // another team's name
		{theirs.ID, ""},     // another team's id
		{"python:3.12", ""}, // an image
		{"docker.io/library/debian:12", ""},
		{"mine:5000/app", ""}, // a registry's port
		{"mine@sha256:0123", ""},
		{"oci:/srv/layout", ""},
	} {
		spec := template.Spec{FromImage: c.image}
		ts.fromTemplate("a", &spec)
		wantImage := c.image
		if c.wantTemplate != "" {
			wantImage = ""
		}
		if spec.FromTemplate != c.wantTemplate || spec.FromImage != wantImage {
			t.Errorf("%s: fromTemplate %q fromImage %q, want %q and %q", c.image, spec.FromTemplate, spec.FromImage, c.wantTemplate, wantImage)
		}
	}
	spec := template.Spec{FromTemplate: "mine", FromImage: "base"} // both: the builder refuses it
	if ts.fromTemplate("a", &spec); spec.FromTemplate != "mine" || spec.FromImage != "base" {
		t.Errorf("a build giving both changed: %+v", spec)
	}
}

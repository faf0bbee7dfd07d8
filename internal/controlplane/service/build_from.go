package service

import (
	"strings"

	"github.com/covesandbox/cove/internal/template"
)

// fromTemplate applies the one rule of where a build starts, whichever
// client sends it: an image reference that names a template of the
// server's — a built-in one or the team's own, with a tag of it or none —
// is that template; anything else is an image. E2B's SDKs parse a
// Dockerfile on the client and send its FROM as fromImage, `cove template
// build` as fromTemplate when it names a template: both mean the same.
func (t *Templates) fromTemplate(team string, spec *template.Spec) {
	if spec.FromImage == "" || spec.FromTemplate != "" || template.IsLocalImage(spec.FromImage) {
		return
	}
	name, tag, _ := strings.Cut(spec.FromImage, ":")
	if strings.ContainsAny(tag, "/@") || strings.Contains(name, "@") { // a registry's port, a digest
		return
	}
	r, err := t.store.Get(team, name)
	if err != nil || (r.Team != team && !r.Public) {
		return
	}
	spec.FromTemplate, spec.FromImage = spec.FromImage, ""
}

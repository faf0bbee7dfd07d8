package template

import (
	"context"
	"strings"

	"github.com/covesandbox/cove/internal/errs"
)

// Store resolves template names. Today it knows the built-in base template;
// built templates join it later.
type Store struct {
	base Template
}

// NewStore prepares the base template under dir and returns the store.
func NewStore(dir string) (*Store, error) {
	base, err := EnsureBase(dir)
	if err != nil {
		return nil, err
	}
	return &Store{base: base}, nil
}

// Resolve finds a template by id, name or name:tag.
func (s *Store) Resolve(ctx context.Context, ref string) (Template, error) {
	name, tag, _ := strings.Cut(ref, ":")
	if name == BaseName && (tag == "" || tag == "default" || tag == "latest") {
		return s.base, nil
	}
	return Template{}, errs.New(errs.NotFound, "template '%s' not found", ref)
}

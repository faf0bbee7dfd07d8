package secrets

import (
	"regexp"
	"strings"
	"unicode"

	"github.com/covesandbox/cove/internal/errs"
)

// IDPrefix starts every secret's id; no name may start with it.
const IDPrefix = "sec_"

// Limits of what a secret holds (the SDK's documented metadata limits).
const (
	MaxNameBytes     = 128
	MaxValueBytes    = 64 << 10
	MaxMetadataKeys  = 32
	MaxMetadataKey   = 128
	MaxMetadataValue = 1024
	MaxMetadataBytes = 8192
)

// Name checks a secret's name and returns it lower-cased, the form it is
// stored and shown in. A name is interpolated into "${e2b.secrets.NAME}",
// so it holds no brace and no control character; it names the secret in
// a URL path, so no slash either.
func Name(name string) (string, error) {
	name = strings.ToLower(name)
	switch {
	case name == "":
		return "", errs.New(errs.InvalidArgument, "a secret needs a name")
	case len(name) > MaxNameBytes:
		return "", errs.New(errs.InvalidArgument, "secret name longer than %d bytes", MaxNameBytes)
	case strings.HasPrefix(name, IDPrefix):
		return "", errs.New(errs.InvalidArgument, "secret name %q: the prefix %q is reserved for secret ids", name, IDPrefix)
	case strings.ContainsFunc(name, func(r rune) bool { return r == '{' || r == '}' || r == '/' || unicode.IsControl(r) }):
		return "", errs.New(errs.InvalidArgument, "secret name %q: no '{', '}', '/' or control characters", name)
	}
	return name, nil
}

// Value checks a secret's value.
func Value(v string) error {
	switch {
	case v == "":
		return errs.New(errs.InvalidArgument, "a secret needs a value")
	case len(v) > MaxValueBytes:
		return errs.New(errs.InvalidArgument, "secret value longer than %d bytes", MaxValueBytes)
	}
	return nil
}

// Metadata checks a secret's metadata against the documented limits.
func Metadata(m map[string]string) error {
	if len(m) > MaxMetadataKeys {
		return errs.New(errs.InvalidArgument, "secret metadata: %d entries, at most %d", len(m), MaxMetadataKeys)
	}
	total := 0
	for k, v := range m {
		if k == "" || len(k) > MaxMetadataKey {
			return errs.New(errs.InvalidArgument, "secret metadata key %q: 1 to %d bytes", k, MaxMetadataKey)
		}
		if len(v) > MaxMetadataValue {
			return errs.New(errs.InvalidArgument, "secret metadata %q: value longer than %d bytes", k, MaxMetadataValue)
		}
		total += len(k) + len(v)
	}
	if total > MaxMetadataBytes {
		return errs.New(errs.InvalidArgument, "secret metadata: %d bytes, at most %d", total, MaxMetadataBytes)
	}
	return nil
}

// placeholder is "${e2b.<kind>.<name>}" in a header value: kind
// "secrets" names a team's secret, "identity.tokens" one of the sandbox's
// workload tokens (svid).
var placeholder = regexp.MustCompile(`\$\{e2b\.(secrets|identity\.tokens|[a-z.]*)\.([^{}]*)\}`)

// Placeholder kinds.
const (
	KindSecret = "secrets"
	KindToken  = "identity.tokens"
)

// Refs are the secret names and the workload token names a header value
// refers to. A placeholder of another kind is an error.
func Refs(value string) (secrets, tokens []string, err error) {
	for _, m := range placeholder.FindAllStringSubmatch(value, -1) {
		switch m[1] {
		case KindSecret:
			name, err := Name(m[2])
			if err != nil {
				return nil, nil, err
			}
			secrets = append(secrets, name)
		case KindToken:
			tokens = append(tokens, m[2])
		default:
			return nil, nil, errs.New(errs.InvalidArgument, "%s: not a placeholder Cove knows (${e2b.secrets.NAME}, ${e2b.identity.tokens.NAME})", m[0])
		}
	}
	return secrets, tokens, nil
}

// Expand replaces each placeholder in value: "${e2b.secrets.NAME}" with
// what secret gives for NAME, "${e2b.identity.tokens.NAME}" with what
// token gives.
func Expand(value string, secret, token func(name string) (string, error)) (string, error) {
	var err error
	out := placeholder.ReplaceAllStringFunc(value, func(p string) string {
		m := placeholder.FindStringSubmatch(p)
		if err != nil {
			return ""
		}
		var v string
		switch m[1] {
		case KindSecret:
			v, err = secret(strings.ToLower(m[2]))
		case KindToken:
			v, err = token(m[2])
		default:
			err = errs.New(errs.InvalidArgument, "%s: not a placeholder Cove knows", p)
		}
		return v
	})
	if err != nil {
		return "", err
	}
	return out, nil
}

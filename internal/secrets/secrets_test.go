package secrets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/errs"
)

func TestName(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"OpenAI-Key", "openai-key", ""},
		{"a.b_c", "a.b_c", ""},
		{"", "", "needs a name"},
		{"sec_x", "", "reserved"},
		{"a{b", "", "no '{'"},
		{"a}b", "", "no '{'"},
		{"a/b", "", "no '{'"},
		{"a\nb", "", "no '{'"},
		{strings.Repeat("x", MaxNameBytes+1), "", "longer than"},
	} {
		got, err := Name(tc.in)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) || got != tc.want {
			t.Errorf("Name(%q) = %q, %v; want %q, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestMetadata(t *testing.T) {
	big := map[string]string{}
	for i := range MaxMetadataKeys + 1 {
		big[strings.Repeat("k", i+1)] = "v"
	}
	for _, tc := range []struct {
		name string
		in   map[string]string
		ok   bool
	}{
		{"none", nil, true},
		{"some", map[string]string{"owner": "me"}, true},
		{"too many entries", big, false},
		{"empty key", map[string]string{"": "v"}, false},
		{"long value", map[string]string{"k": strings.Repeat("v", MaxMetadataValue+1)}, false},
		{"too many bytes", map[string]string{"a": strings.Repeat("v", 1000), "b": strings.Repeat("v", 1000), "c": strings.Repeat("v", 1000),
			"d": strings.Repeat("v", 1000), "e": strings.Repeat("v", 1000), "f": strings.Repeat("v", 1000), "g": strings.Repeat("v", 1000),
			"h": strings.Repeat("v", 1000), "i": strings.Repeat("v", 1000)}, false},
	} {
		if err := Metadata(tc.in); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestRefsAndExpand(t *testing.T) {
	vals := map[string]string{"tok": "T", "other.key": "O"}
	reveal := func(name string) (string, error) {
		if v, ok := vals[name]; ok {
			return v, nil
		}
		return "", errs.New(errs.NotFound, "secret %s not found", name)
	}
	token := func(name string) (string, error) {
		if name == "aws" {
			return "jwt-for-" + name, nil
		}
		return "", errs.New(errs.NotFound, "no token %s", name)
	}
	for _, tc := range []struct{ in, refs, tokens, out, err string }{
		{"Bearer ${e2b.secrets.tok}", "tok", "", "Bearer T", ""},
		{"${e2b.secrets.TOK}:${e2b.secrets.other.key}", "tok,other.key", "", "T:O", ""},
		{"plain", "", "", "plain", ""},
		{"${e2b.secrets.missing}", "missing", "", "", "missing not found"},
		{"Bearer ${e2b.identity.tokens.aws}", "", "aws", "Bearer jwt-for-aws", ""},
		{"${e2b.identity.tokens.gcp} ${e2b.secrets.tok}", "tok", "gcp", "", "no token gcp"},
		{"${e2b.other.x}", "", "", "", "not a placeholder"},
		{"${e2b.secrets.sec_x}", "", "", "", "reserved"},
	} {
		refs, tokens, err := Refs(tc.in)
		if err != nil && !strings.Contains(err.Error(), tc.err) || err == nil && (strings.Join(refs, ",") != tc.refs || strings.Join(tokens, ",") != tc.tokens) {
			t.Errorf("Refs(%q) = %v, %v, %v; want %q, %q", tc.in, refs, tokens, err, tc.refs, tc.tokens)
		}
		out, err := Expand(tc.in, reveal, token)
		if (err == nil) != (tc.err == "") || out != tc.out {
			t.Errorf("Expand(%q) = %q, %v; want %q, %q", tc.in, out, err, tc.out, tc.err)
		}
	}
}

// TestKey: a sealed value opens for its team and id only; a key file is
// made once, kept, and refused when others may read it or it is not a key.
func TestKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secrets.key")
	k, err := LoadKey(path, true)
	if err != nil {
		t.Fatal(err)
	}
	sealed := k.Seal("team-a", "sec_1", "value")
	if strings.Contains(string(sealed), "value") {
		t.Error("the sealed value holds the value")
	}
	again, err := LoadKey(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := again.Open("team-a", "sec_1", sealed); err != nil || v != "value" {
		t.Errorf("open with the reloaded key: %q, %v", v, err)
	}
	for _, tc := range []struct{ team, id string }{{"team-b", "sec_1"}, {"team-a", "sec_2"}} {
		if _, err := k.Open(tc.team, tc.id, sealed); err == nil {
			t.Errorf("a value sealed for team-a/sec_1 opens as %s/%s", tc.team, tc.id)
		}
	}
	other, _ := NewKey(make([]byte, KeySize))
	if _, err := other.Open("team-a", "sec_1", sealed); err == nil {
		t.Error("another key opens the value")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(path, false); err == nil || !strings.Contains(err.Error(), "other users may read it") {
		t.Errorf("a key others may read: %v", err)
	}
	bad := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(bad, []byte("not hex\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(bad, false); err == nil || !strings.Contains(err.Error(), "hex digits") {
		t.Errorf("a key file of no key: %v", err)
	}
	if _, err := LoadKey(filepath.Join(dir, "missing.key"), false); err == nil {
		t.Error("a missing key file without create loads")
	}
}

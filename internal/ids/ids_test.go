package ids

import (
	"regexp"
	"testing"
)

func TestNew(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range []struct {
		prefix string
		n      int
		want   string
	}{
		{"i", 19, `^i[a-z0-9]{19}$`},
		{"", 20, `^[a-z0-9]{20}$`},
		{"v", 20, `^v[a-z0-9]{20}$`},
	} {
		for range 100 {
			id := New(tc.prefix, tc.n)
			if !regexp.MustCompile(tc.want).MatchString(id) {
				t.Fatalf("New(%q, %d) = %q, want %s", tc.prefix, tc.n, id, tc.want)
			}
			if seen[id] {
				t.Fatalf("%q twice", id)
			}
			seen[id] = true
		}
	}
}

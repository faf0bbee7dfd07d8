package service

import (
	"fmt"
	"strings"
	"testing"
)

func TestCheckMetadata(t *testing.T) {
	many := map[string]string{}
	for i := range MaxMetadataKeys + 1 {
		many[fmt.Sprint("k", i)] = "v"
	}
	full := map[string]string{}
	for i := range MaxMetadataBytes / MaxMetadataValBytes {
		full[fmt.Sprint("k", i)] = strings.Repeat("v", MaxMetadataValBytes-len(fmt.Sprint("k", i)))
	}
	over := map[string]string{"x": strings.Repeat("v", MaxMetadataValBytes)}
	for k, v := range full {
		over[k] = v
	}
	tests := []struct {
		name string
		md   map[string]string
		want string // "" when taken
	}{
		{"none", nil, ""},
		{"E2B's usual", map[string]string{"userId": "u-1", "cove.isolation": "gvisor"}, ""},
		{"at every bound", full, ""},
		{"too many keys", many, "metadata has 65 keys, at most 64 are allowed"},
		{"an empty key", map[string]string{"": "v"}, "a key must not be empty"},
		{"a long key", map[string]string{strings.Repeat("k", MaxMetadataKeyBytes+1): "v"}, "is 257 bytes, at most 256 are allowed"},
		{"a long value", map[string]string{"k": strings.Repeat("v", MaxMetadataValBytes+1)}, `metadata "k": the value is 2049 bytes, at most 2048 are allowed`},
		{"too much in all", over, "at most 16384 are allowed (keys and values together)"},
	}
	for _, tc := range tests {
		err := CheckMetadata(tc.md)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

package codeinterp

import (
	"maps"
	"slices"
	"testing"
)

// envKernel records what prepareEnv sets in it.
type envKernel struct {
	kernel
	sets  []map[string]string
	unset [][]string
}

func (k *envKernel) setEnv(set map[string]string, unset []string) error {
	k.sets = append(k.sets, maps.Clone(set))
	k.unset = append(k.unset, slices.Clone(unset))
	return nil
}

// TestPrepareEnv: a context's first execution sets only the sandbox's
// variables that differ from the environment its kernel started with;
// later ones what changed since the one before.
func TestPrepareEnv(t *testing.T) {
	s := &Server{cfg: Config{Env: []string{"PATH=/usr/bin", "E2B_SANDBOX=true", "OLD=1"}}}
	for _, tc := range []struct {
		name      string
		sandboxes []map[string]string // the sandbox's variables at each execution
		request   map[string]string
		wantSets  []map[string]string
		wantUnset [][]string
	}{
		{"unchanged since the start: nothing to set", []map[string]string{{"E2B_SANDBOX": "true", "OLD": "1"}}, nil, nil, nil},
		{"a new and a changed variable", []map[string]string{{"E2B_SANDBOX": "true", "OLD": "2", "NEW": "x"}}, nil,
			[]map[string]string{{"OLD": "2", "NEW": "x"}}, [][]string{nil}},
		{"the request's own", []map[string]string{{"E2B_SANDBOX": "true"}}, map[string]string{"REQ": "r"},
			[]map[string]string{{"REQ": "r"}}, [][]string{nil}},
		{"later: what changed since", []map[string]string{{"E2B_SANDBOX": "true", "A": "1"}, {"E2B_SANDBOX": "true"}}, nil,
			[]map[string]string{{"A": "1"}, {}}, [][]string{nil, {"A"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &codeContext{}
			k := &envKernel{}
			for _, env := range tc.sandboxes {
				if err := s.prepareEnv(c, k, env, tc.request); err != nil {
					t.Fatal(err)
				}
			}
			if len(k.sets) != len(tc.wantSets) {
				t.Fatalf("%d setEnv calls (%v, unset %v), want %d", len(k.sets), k.sets, k.unset, len(tc.wantSets))
			}
			for i := range k.sets {
				if !maps.Equal(k.sets[i], tc.wantSets[i]) || !slices.Equal(k.unset[i], tc.wantUnset[i]) {
					t.Errorf("call %d set %v unset %v, want %v and %v", i, k.sets[i], k.unset[i], tc.wantSets[i], tc.wantUnset[i])
				}
			}
		})
	}
}

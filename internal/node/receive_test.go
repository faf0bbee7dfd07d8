package node_test

import (
	"testing"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/node"
	"github.com/covesandbox/cove/internal/template"
)

// TestReceiveRefuses: a node takes over only a sandbox paused with its
// files shared, whose layers agree with its saved template's, that
// mounts no volume and binds no host path writable; anything else is
// refused and leaves nothing.
func TestReceiveRefuses(t *testing.T) {
	h := newHost(t)
	m := h.manager(t)
	defer m.Close()
	good := func() node.Info {
		tpl := template.Template{ID: "base"}
		tpl.RootFS.Layers = []string{"/x/layers/sha256-aa", "/x/layers/sha256-bb"}
		tpl.RootFS.Binds = []isolation.Bind{{Source: "/usr", Target: "/usr"}}
		return node.Info{ID: "imovedfromelsewhere1", State: node.StatePaused, Layers: []string{"/y/sha256-aa", "/y/sha256-bb"},
			Rest: node.Rest{Phase: node.PhaseFiles, Files: &node.SavedFiles{Template: tpl, Blobs: map[string]string{"sha256-aa": "1", "sha256-bb": "2"}}}}
	}
	tests := []struct {
		name string
		edit func(*node.Info)
		kind errs.Kind
	}{
		{"a bad id", func(i *node.Info) { i.ID = "../../etc" }, errs.InvalidArgument},
		{"running", func(i *node.Info) { i.State = node.StateRunning }, errs.Conflict},
		{"paused with nothing shared", func(i *node.Info) { i.Rest.Files.Blobs = nil }, errs.Conflict},
		{"paused as files, its files missing", func(i *node.Info) { i.Rest.Files = nil }, errs.Conflict},
		{"mounting a volume", func(i *node.Info) { i.Volumes = []node.VolumeMount{{ID: "v1", Path: "/data"}} }, errs.Conflict},
		{"layers that differ from its template's", func(i *node.Info) { i.Layers = i.Layers[:1] }, errs.InvalidArgument},
		{"a host path bound writable", func(i *node.Info) { i.Rest.Files.Template.RootFS.Binds[0].Writable = true }, errs.InvalidArgument},
		{"an unknown driver", func(i *node.Info) { i.Isolation = "qemu" }, errs.InvalidArgument},
		{"no object store to fetch from", func(*node.Info) {}, errs.Unavailable},
	}
	for _, tc := range tests {
		info := good()
		tc.edit(&info)
		if _, err := m.Receive(ctxT(t), info); !errs.Is(err, tc.kind) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.kind)
		}
	}
	if left := h.leftovers(t); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if got := listOf(m); len(got) != 0 {
		t.Errorf("table holds %v", got)
	}
}

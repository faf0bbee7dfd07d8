package node

import (
	"context"
	"slices"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// Receive takes over a sandbox paused without its memory on another node
// of the cluster (lost since), from that node's record of it: its layers
// are fetched from the object store (Saved.Blobs names their archives),
// and it becomes this node's, paused, for Resume to boot here over the
// same files, with the same id and tokens. A sandbox that mounts volumes
// cannot move (they are its node's).
func (m *Manager) Receive(ctx context.Context, info Info) (Info, error) {
	if err := isolation.ValidateID(info.ID); err != nil {
		return Info{}, err
	}
	saved := info.Rest.Files
	switch {
	case info.Phase() != PhaseFiles || saved == nil || len(saved.Blobs) == 0:
		return Info{}, errs.New(errs.Conflict, "sandbox %s is not paused with its files shared: it cannot move", info.ID)
	case len(info.Volumes) > 0:
		return Info{}, errs.New(errs.Conflict, "sandbox %s mounts volumes of its node: it cannot move", info.ID)
	case !slices.Equal(sandboxes.LayerNames(info.Layers), sandboxes.LayerNames(saved.Template.RootFS.Layers)):
		return Info{}, errs.New(errs.InvalidArgument, "sandbox %s: its layers and its saved template's differ", info.ID)
	case slices.ContainsFunc(saved.Template.RootFS.Binds, func(b isolation.Bind) bool { return b.Writable }):
		// Host binds are read-only, always: a state saying otherwise was
		// not written by a node.
		return Info{}, errs.New(errs.InvalidArgument, "sandbox %s: its state binds a host path writable", info.ID)
	}
	if _, err := m.driverNamed(info.Isolation); err != nil {
		return Info{}, err
	}
	if m.lookup(info.ID) != nil {
		return Info{}, errs.New(errs.AlreadyExists, "sandbox %s already exists", info.ID)
	}
	names := sandboxes.LayerNames(info.Layers)
	if err := m.templates.FetchLayers(ctx, names, saved.Blobs); err != nil {
		return Info{}, err
	}
	// Its paths are this node's; what the other node held of it is not.
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = m.templates.LayerPath(n)
	}
	info.Layers = paths
	files := &SavedFiles{Layer: saved.Layer, Template: saved.Template, Blobs: saved.Blobs}
	files.Template.RootFS.Layers = slices.Clone(paths)
	info.Handle = isolation.Handle{}
	if info.Network != nil {
		info.Network = &NetworkInfo{Internet: info.Network.Internet, AllowOut: info.Network.AllowOut,
			DenyOut: info.Network.DenyOut, AllowDomains: info.Network.AllowDomains, Rules: info.Network.Rules, EgressProxy: info.Network.EgressProxy, Tokens: info.Network.Tokens}
	}
	m.mu.Lock()
	_, taken := m.sandboxes[info.ID]
	m.mu.Unlock()
	if taken {
		return Info{}, errs.New(errs.AlreadyExists, "sandbox %s already exists", info.ID)
	}
	if err := m.recordAs(&info, StatePaused, Rest{Phase: PhaseFiles, Files: files}); err != nil {
		return Info{}, err
	}
	m.adoptSaved(ctx, info)
	m.log.Info("sandbox taken over from another node, paused", logx.SandboxID(info.ID), "layers", len(paths))
	return info, nil
}

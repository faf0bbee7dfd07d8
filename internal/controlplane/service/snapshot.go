package service

import (
	"context"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/template"
)

// CreateSnapshot saves a team's sandbox's files — and its processes, on a
// driver that can copy them — as a template sandboxes can start from
// (named name, or unnamed when name is ""): each runs on from that state.
// The sandbox goes on (frozen for the copy only).
func (s *Service) CreateSnapshot(ctx context.Context, team, id, name string, memory bool) (_ template.Record, err error) {
	if s.cfg.Snapshots == nil {
		return template.Record{}, errs.New(errs.Unimplemented, "snapshots in a cluster need an object store for its nodes to share them (cove api and cove node --object-store)")
	}
	sb, err := s.Get(ctx, team, id)
	if err != nil {
		return template.Record{}, err
	}
	hold := &StorageHold{}
	if s.cfg.ReserveStorage != nil {
		if hold, err = s.cfg.ReserveStorage(ctx, team, s.snapshotEstimate(ctx, id, sb.Isolation, memory)); err != nil {
			return template.Record{}, err
		}
	}
	defer func() { hold.End(ctx, err == nil) }()
	save := func() (sandboxes.Copy, error) { return s.node.SaveLayer(ctx, id, memory) }
	if sh, ok := s.node.(sharer); ok {
		save = func() (sandboxes.Copy, error) { return sh.ShareLayer(ctx, id, memory) }
	}
	c, err := save()
	if err != nil {
		return template.Record{}, err
	}
	// Released after the record names the copy, or at once: the node
	// removes what nothing names.
	defer c.Release()
	if err := hold.Settle(ctx, copySize(c)); err != nil {
		s.log.Info("snapshot refused past the team's storage quota", logx.SandboxID(id), "bytes", copySize(c), logx.Err(err))
		return template.Record{}, err
	}
	info, sum := c.Info, c.Layer
	rec, err := s.cfg.Snapshots.CreateSnapshot(name, template.SnapshotSource{
		Team: team, SandboxID: id, TemplateID: info.TemplateID, BuildID: info.BuildID, Env: info.EnvVars, Layers: sandboxes.LayerNames(info.Layers),
		CPUCount: int((info.Limits.CPUMillis + 999) / 1000), MemoryMB: int(info.Limits.MemoryMB), DiskMB: int(info.Limits.DiskMB),
		Isolation: info.Isolation, Blobs: c.Blobs,
	}, sum, c.Image)
	if err != nil {
		return template.Record{}, err
	}
	s.log.Info("snapshot created", logx.SandboxID(id), "snapshot", rec.SnapshotID(), "layer", sum.Name, "processes", c.Image != nil)
	s.eventOf(ctx, id, store.EventCheckpointed, store.ReasonAPI)
	return rec, nil
}

// snapshotEstimate is what a snapshot of sandbox id will store, as far as its
// node says before the copy: what its writable layer holds and, when the
// snapshot keeps its processes, the memory they use (the namespaces
// driver copies none). A sandbox whose use is unknown (paused) counts
// nothing: its real size is settled after the copy.
func (s *Service) snapshotEstimate(ctx context.Context, id, driver string, memory bool) int64 {
	st, err := s.node.Stats(ctx, id)
	if err != nil {
		return 0
	}
	n := int64(st.DiskUsed)
	if memory && driver != "namespaces" {
		n += int64(st.MemoryUsage)
	}
	return n
}

// copySize is what a copy stores: its layer's files and its processes'
// image.
func copySize(c sandboxes.Copy) int64 {
	n := c.Layer.Bytes
	if c.Image != nil {
		n += c.Image.Bytes()
	}
	return n
}

// sharer is a node that keeps a snapshot's copy where every node reaches
// it (a cluster's, through its object store).
type sharer interface {
	ShareLayer(ctx context.Context, id string, memory bool) (sandboxes.Copy, error)
}

// Snapshots lists a team's snapshots, newest first, of sandboxID and
// named name when given.
func (s *Service) Snapshots(team, sandboxID, name string) []template.Record {
	if s.cfg.Snapshots == nil {
		return nil
	}
	return s.cfg.Snapshots.ListSnapshots(team, sandboxID, name)
}

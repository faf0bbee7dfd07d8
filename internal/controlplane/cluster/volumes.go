package cluster

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/volume"
)

// Volumes are a cluster's volumes (the service's VolumeStore): each
// record, in the database, names the node that holds the volume's files;
// a sandbox that mounts it is placed there and its content is served
// through it. While that node is lost the volume is kept but cannot be
// mounted or read (503); it comes back with its node.
type Volumes struct {
	c       *Cluster
	records store.Volumes
	log     *slog.Logger
}

// Volumes returns the cluster's volumes over their records.
func (c *Cluster) Volumes(records store.Volumes) *Volumes {
	return &Volumes{c: c, records: records, log: c.log}
}

// Create makes a team's volume on the least loaded node that can, then
// records it. The database keeps names unique: when another replica
// recorded the name first, the node's copy is deleted again (and a
// replica that dies in between leaves a volume its node removes, since
// no record names it: server's sweepVolumes).
func (v *Volumes) Create(ctx context.Context, team, name string) (volume.Volume, error) {
	if err := volume.ValidName(name); err != nil {
		return volume.Volume{}, err
	}
	if _, err := v.records.Volume(ctx, team, name); err == nil {
		return volume.Volume{}, errs.New(errs.AlreadyExists, "volume %q already exists", name)
	}
	want := volume.Volume{ID: volume.NewID(), Team: team, Name: name}
	var why []string
	for _, m := range v.c.candidates("", "") {
		vol, err := m.client.CreateVolume(ctx, want)
		if err != nil {
			if ctx.Err() != nil || !errs.Is(err, errs.Unavailable) && !errs.Is(err, errs.ResourceExhausted) && !errs.Is(err, errs.Unimplemented) {
				return volume.Volume{}, err
			}
			why = append(why, m.id+": "+err.Error())
			continue
		}
		vol.Node = m.id
		if err := v.records.AddVolume(ctx, vol); err != nil {
			if derr := m.client.DeleteVolume(context.WithoutCancel(ctx), vol.ID); derr != nil {
				v.log.Warn("a volume not recorded stays on its node until it sweeps it", "volume", vol.ID, "node", m.id, logx.Err(derr))
			}
			return volume.Volume{}, err
		}
		v.log.Info("volume created", "volume", vol.ID, "node", m.id)
		return vol, nil
	}
	if len(why) == 0 {
		return volume.Volume{}, errs.New(errs.Unavailable, "no node of the cluster is available")
	}
	return volume.Volume{}, errs.New(errs.Unavailable, "no node of the cluster could make the volume: %s", strings.Join(why, "; "))
}

// Get finds a team's volume by id or name.
func (v *Volumes) Get(ctx context.Context, team, ref string) (volume.Volume, error) {
	return v.records.Volume(ctx, team, ref)
}

// ByID finds a volume by id.
func (v *Volumes) ByID(ctx context.Context, id string) (volume.Volume, error) {
	return v.records.VolumeByID(ctx, id)
}

// List returns a team's volumes, oldest first.
func (v *Volumes) List(ctx context.Context, team string) ([]volume.Volume, error) {
	return v.records.TeamVolumes(ctx, team)
}

// Delete removes a team's volume: its record, then its files on its node
// (a node not live then removes them when it is back).
func (v *Volumes) Delete(ctx context.Context, team, ref string) error {
	vol, err := v.records.RemoveVolume(ctx, team, ref)
	if err != nil {
		return err
	}
	client := v.c.client(vol.Node)
	if client == nil {
		v.log.Info("volume deleted; its node removes its files when it is back", "volume", vol.ID, "node", vol.Node)
		return nil
	}
	if err := client.DeleteVolume(context.WithoutCancel(ctx), vol.ID); err != nil {
		v.log.Warn("volume deleted; its node removes its files at its next sweep", "volume", vol.ID, "node", vol.Node, logx.Err(err))
	}
	return nil
}

// Files serves vol's content through the node that holds it.
func (v *Volumes) Files(_ context.Context, vol volume.Volume) (http.Handler, error) {
	client := v.c.client(vol.Node)
	if client == nil {
		return nil, errs.New(errs.Unavailable, "volume %q is on node %s, which is not available", vol.Name, vol.Node)
	}
	return client.VolumeFiles(), nil
}

package service

import (
	"context"
	"crypto/subtle"
	"path"
	"slices"
	"strings"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/tokens"
	"github.com/covesandbox/cove/internal/volume"
)

// VolumeStore keeps a team's volumes: one host's (volume.Store) or a
// cluster's, whose records are in its database and files on a node
// (cluster.Volumes).
type VolumeStore interface {
	Create(ctx context.Context, team, name string) (volume.Volume, error)
	// Get finds a team's volume by id or name.
	Get(ctx context.Context, team, ref string) (volume.Volume, error)
	ByID(ctx context.Context, id string) (volume.Volume, error)
	List(ctx context.Context, team string) ([]volume.Volume, error)
	Delete(ctx context.Context, team, ref string) error
}

// Volumes is the volume use cases: E2B's /volumes and the token that
// guards a volume's content API.
type Volumes struct {
	store  VolumeStore
	secret []byte
	// CheckStorage, when set, refuses a volume to a team whose storage
	// quota is used up (Templates.CheckStorage, which counts volumes).
	CheckStorage func(ctx context.Context, team string) error
}

// NewVolumes returns the volume service; secret derives volume tokens.
func NewVolumes(st VolumeStore, secret []byte) *Volumes {
	return &Volumes{store: st, secret: secret}
}

// Create makes a team's volume and returns it with its content token.
func (v *Volumes) Create(ctx context.Context, team, name string) (volume.Volume, string, error) {
	if v.CheckStorage != nil {
		if err := v.CheckStorage(ctx, team); err != nil {
			return volume.Volume{}, "", err
		}
	}
	vol, err := v.store.Create(ctx, team, name)
	if err != nil {
		return volume.Volume{}, "", err
	}
	return vol, tokens.Volume(v.secret, vol.ID), nil
}

// Get returns a team's volume (by id or name) and its content token.
func (v *Volumes) Get(ctx context.Context, team, ref string) (volume.Volume, string, error) {
	vol, err := v.store.Get(ctx, team, ref)
	if err != nil {
		return volume.Volume{}, "", err
	}
	return vol, tokens.Volume(v.secret, vol.ID), nil
}

// TeamBytes is the size of a team's volumes: what its storage quota
// counts of them (Templates.VolumeBytes).
func (v *Volumes) TeamBytes(ctx context.Context, team string) (int64, error) {
	vols, err := v.store.List(ctx, team)
	var total int64
	for _, vol := range vols {
		total += vol.SizeMB << 20
	}
	return total, err
}

// List returns a team's volumes.
func (v *Volumes) List(ctx context.Context, team string) ([]volume.Volume, error) {
	return v.store.List(ctx, team)
}

// Delete removes a team's volume; sandboxes that mount it keep it until
// they end.
func (v *Volumes) Delete(ctx context.Context, team, ref string) error {
	return v.store.Delete(ctx, team, ref)
}

// Authorize checks a content API token for volume id and returns the
// volume.
func (v *Volumes) Authorize(ctx context.Context, id, token string) (volume.Volume, error) {
	want := tokens.Volume(v.secret, id)
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(want)) != 1 {
		return volume.Volume{}, errs.New(errs.Unauthenticated, "invalid volume token")
	}
	return v.store.ByID(ctx, id)
}

// VolumeMount is a volume a sandbox mounts (by name) at a path.
type VolumeMount = sandboxes.VolumeMount

// reserved are paths no volume may cover: what the sandbox and its agent
// are made of.
var reserved = []string{"/proc", "/dev", "/sys", "/.cove"}

// Mounts resolves a create's volume mounts (a team's volumes, by name or
// id), checking the paths: absolute, clean, not /, not under /proc, /dev,
// /sys or /.cove, each once. In a cluster it also returns the node that
// holds them, where the sandbox must run: all on one node.
func (v *Volumes) Mounts(ctx context.Context, team string, mounts []VolumeMount) ([]VolumeMount, string, error) {
	var out []VolumeMount
	var on string
	seen := map[string]bool{}
	for _, m := range mounts {
		p := m.Path
		if !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" {
			return nil, "", errs.New(errs.InvalidArgument, "volumeMounts: path %q must be an absolute, clean path other than /", p)
		}
		if slices.ContainsFunc(reserved, func(r string) bool { return p == r || strings.HasPrefix(p, r+"/") }) {
			return nil, "", errs.New(errs.InvalidArgument, "volumeMounts: path %q is reserved (%s)", p, strings.Join(reserved, ", "))
		}
		if seen[p] {
			return nil, "", errs.New(errs.InvalidArgument, "volumeMounts: path %q twice", p)
		}
		seen[p] = true
		vol, err := v.store.Get(ctx, team, m.Name)
		if err != nil {
			return nil, "", errs.New(errs.InvalidArgument, "volumeMounts: %v", err)
		}
		if len(out) > 0 && vol.Node != on {
			return nil, "", errs.New(errs.InvalidArgument, "volumeMounts: volumes %q and %q are on different nodes of the cluster; a sandbox mounts volumes of one node", out[0].Name, vol.Name)
		}
		on = vol.Node
		out = append(out, VolumeMount{ID: vol.ID, Name: vol.Name, Path: p})
	}
	return out, on, nil
}

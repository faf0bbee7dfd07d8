package service

import (
	"crypto/subtle"
	"path"
	"slices"
	"strings"

	"github.com/covesandbox/cove/internal/controlplane/auth"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/node"
	"github.com/covesandbox/cove/internal/volume"
)

// Volumes is the volume use cases: E2B's /volumes and the token that
// guards a volume's content API, over the node's volume store.
type Volumes struct {
	store  *volume.Store
	secret []byte
}

// NewVolumes returns the volume service; secret derives volume tokens. A
// nil store (an API replica of a cluster, whose nodes share no volumes
// yet) refuses every volume.
func NewVolumes(st *volume.Store, secret []byte) *Volumes {
	return &Volumes{store: st, secret: secret}
}

// here refuses volumes where there are none.
func (v *Volumes) here() error {
	if v.store == nil {
		return errs.New(errs.Unimplemented, "volumes are not available in a cluster yet (cove server has them)")
	}
	return nil
}

// Create makes a team's volume and returns it with its content token.
func (v *Volumes) Create(team, name string) (volume.Volume, string, error) {
	if err := v.here(); err != nil {
		return volume.Volume{}, "", err
	}
	vol, err := v.store.Create(team, name)
	if err != nil {
		return volume.Volume{}, "", err
	}
	return vol, auth.VolumeToken(v.secret, vol.ID), nil
}

// Get returns a team's volume (by id or name) and its content token.
func (v *Volumes) Get(team, ref string) (volume.Volume, string, error) {
	if err := v.here(); err != nil {
		return volume.Volume{}, "", err
	}
	vol, err := v.store.Get(team, ref)
	if err != nil {
		return volume.Volume{}, "", err
	}
	return vol, auth.VolumeToken(v.secret, vol.ID), nil
}

// List returns a team's volumes.
func (v *Volumes) List(team string) []volume.Volume {
	if v.store == nil {
		return nil
	}
	return v.store.List(team)
}

// Delete removes a team's volume; sandboxes that mount it keep it until
// they end.
func (v *Volumes) Delete(team, ref string) error {
	if err := v.here(); err != nil {
		return err
	}
	return v.store.Delete(team, ref)
}

// Authorize checks a content API token for volume id and returns where
// the volume's files are on the host.
func (v *Volumes) Authorize(id, token string) (string, error) {
	want := auth.VolumeToken(v.secret, id)
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(want)) != 1 {
		return "", errs.New(errs.Unauthenticated, "invalid volume token")
	}
	if err := v.here(); err != nil {
		return "", err
	}
	if _, err := v.store.ByID(id); err != nil {
		return "", err
	}
	return v.store.Path(id), nil
}

// VolumeMount is a volume a sandbox mounts (by name) at a path.
type VolumeMount = node.VolumeMount

// reserved are paths no volume may cover: what the sandbox and its agent
// are made of.
var reserved = []string{"/proc", "/dev", "/sys", "/.cove"}

// Binds resolves a create's volume mounts (a team's volumes, by name or
// id) into read-write binds, checking the paths: absolute, clean, not /,
// not under /proc, /dev, /sys or /.cove, each once.
func (v *Volumes) Binds(team string, mounts []VolumeMount) ([]VolumeMount, error) {
	if len(mounts) == 0 {
		return nil, nil
	}
	if err := v.here(); err != nil {
		return nil, err
	}
	var out []VolumeMount
	seen := map[string]bool{}
	for _, m := range mounts {
		p := m.Path
		if !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" {
			return nil, errs.New(errs.InvalidArgument, "volumeMounts: path %q must be an absolute, clean path other than /", p)
		}
		if slices.ContainsFunc(reserved, func(r string) bool { return p == r || strings.HasPrefix(p, r+"/") }) {
			return nil, errs.New(errs.InvalidArgument, "volumeMounts: path %q is reserved (%s)", p, strings.Join(reserved, ", "))
		}
		if seen[p] {
			return nil, errs.New(errs.InvalidArgument, "volumeMounts: path %q twice", p)
		}
		seen[p] = true
		vol, err := v.store.Get(team, m.Name)
		if err != nil {
			return nil, errs.New(errs.InvalidArgument, "volumeMounts: %v", err)
		}
		out = append(out, VolumeMount{Name: vol.Name, Path: p, Bind: isolation.Bind{Source: v.store.Path(vol.ID), Target: p, Writable: true}})
	}
	return out, nil
}

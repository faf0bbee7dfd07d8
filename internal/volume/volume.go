// Package volume keeps named volumes: size-capped file systems a team's
// sandboxes mount read-write at a path (E2B's volumeMounts), shared by the
// sandboxes that mount them and kept after they end. Each is an ext4 image
// on the data directory's disk, loop-mounted (nosuid, nodev) under
// <dir>/mnt/<id> from its creation until its deletion — across server
// restarts, since sandboxes that mount it outlive the server: mounting an
// image a second time while another mount of it lives would corrupt it.
package volume

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/ids"
	"github.com/covesandbox/cove/internal/logx"
)

// UserID owns a new volume's root: the sandboxes' default user.
const UserID = 1000

// Volume is a volume's record.
type Volume struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Team      string    `json:"team"`
	SizeMB    int64     `json:"sizeMB"`
	CreatedAt time.Time `json:"createdAt"`
	// Node holds its files in a cluster (empty on one host).
	Node string `json:"node,omitempty"`
}

// Store holds the node's volumes under dir: <id>.json records, <id>.img
// images, mnt/<id> their mounts.
type Store struct {
	dir    string
	sizeMB int64
	log    *slog.Logger
	// missing, when set, is why volumes cannot be made here.
	missing string
	// MaxPerTeam and MaxTotal bound how many volumes a team, and all
	// teams, keep here: each holds a loop device, a mount and its image's
	// disk (0: DefaultMaxPerTeam, DefaultMaxTotal). Set before serving.
	MaxPerTeam, MaxTotal int

	mu   sync.Mutex
	vols map[string]*Volume
}

// The default bounds of a store's volumes.
const (
	DefaultMaxPerTeam = 32
	DefaultMaxTotal   = 512
)

// Open opens the store, mounting the volumes not mounted (after a host
// reboot) and removing what a create cut short left. sizeMB is a new
// volume's size.
func Open(dir string, sizeMB int64, log *slog.Logger) (*Store, error) {
	if sizeMB < 16 {
		return nil, fmt.Errorf("volume size %d MiB: at least 16", sizeMB)
	}
	s := &Store{dir: dir, sizeMB: sizeMB, log: log, vols: map[string]*Volume{}}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		s.missing = "mkfs.ext4 (Debian's e2fsprogs) is not installed"
	}
	for _, d := range []string{dir, filepath.Join(dir, "mnt")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || validID(id) != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		var v Volume
		if err == nil {
			err = json.Unmarshal(data, &v)
		}
		if err != nil || v.ID != id {
			log.Error("unreadable volume record", "file", e.Name(), logx.Err(err))
			continue
		}
		if err := s.mount(id); err != nil {
			log.Error("mount volume", "volume", id, logx.Err(err))
			continue
		}
		s.vols[id] = &v
	}
	// Images and mount points of creates cut short (no record).
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".img"); ok && s.vols[id] == nil && validID(id) == nil {
			s.remove(id)
		}
	}
	mnts, _ := os.ReadDir(filepath.Join(dir, "mnt"))
	for _, e := range mnts {
		if s.vols[e.Name()] == nil && validID(e.Name()) == nil {
			s.remove(e.Name())
		}
	}
	return s, nil
}

// Path is where a volume's file system is mounted on the host.
func (s *Store) Path(id string) string { return filepath.Join(s.dir, "mnt", id) }

func (s *Store) image(id string) string { return filepath.Join(s.dir, id+".img") }

// Locate returns where volume id's files are on the host.
func (s *Store) Locate(id string) (string, error) {
	if _, err := s.ByID(context.Background(), id); err != nil {
		return "", err
	}
	return s.Path(id), nil
}

// Create makes a team's volume called name.
func (s *Store) Create(_ context.Context, team, name string) (Volume, error) {
	return s.CreateAs(NewID(), team, name)
}

// CreateAs makes a team's volume called name under id (a cluster's
// replica chose it).
func (s *Store) CreateAs(id, team, name string) (Volume, error) {
	if err := ValidName(name); err != nil {
		return Volume{}, err
	}
	if err := validID(id); err != nil {
		return Volume{}, err
	}
	if s.missing != "" {
		return Volume{}, errs.New(errs.Unavailable, "volumes cannot be made here: %s", s.missing)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := 0
	for _, v := range s.vols {
		if v.Team == team && v.Name == name || v.ID == id {
			return Volume{}, errs.New(errs.AlreadyExists, "volume %q already exists", name)
		}
		if v.Team == team {
			mine++
		}
	}
	if limit := cmp.Or(s.MaxPerTeam, DefaultMaxPerTeam); mine >= limit {
		return Volume{}, errs.New(errs.QuotaExceeded, "team quota: the team has %d volumes, at most %d; delete one to make another", mine, limit)
	}
	if limit := cmp.Or(s.MaxTotal, DefaultMaxTotal); len(s.vols) >= limit {
		return Volume{}, errs.New(errs.ResourceExhausted, "this node keeps %d volumes, its most", limit)
	}
	v := Volume{ID: id, Name: name, Team: team, SizeMB: s.sizeMB, CreatedAt: time.Now().UTC()}
	if err := s.makeImage(v.ID); err != nil {
		s.remove(v.ID)
		return Volume{}, err
	}
	if err := s.mount(v.ID); err != nil {
		s.remove(v.ID)
		return Volume{}, err
	}
	if err := fsutil.WriteJSON(filepath.Join(s.dir, v.ID+".json"), v); err != nil {
		s.remove(v.ID)
		return Volume{}, err
	}
	s.vols[v.ID] = &v
	s.log.Info("volume created", "volume", v.ID, "name", name, "sizeMB", v.SizeMB)
	return v, nil
}

// makeImage writes an empty ext4 image of the store's size (sparse).
func (s *Store) makeImage(id string) error {
	f, err := os.OpenFile(s.image(id), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(s.sizeMB << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("volume image: %w", err)
	}
	out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", "-E",
		fmt.Sprintf("root_owner=%d:%d,lazy_itable_init=1,nodiscard", UserID, UserID), s.image(id)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4: %v: %s", err, out)
	}
	return nil
}

// mount loop-mounts a volume's image at its path unless it is mounted
// there already. The loop device clears itself once the last mount of it
// (the host's or a sandbox's) is gone.
func (s *Store) mount(id string) error {
	target := s.Path(id)
	if err := os.Mkdir(target, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if mounted, err := isMountPoint(target); err != nil || mounted {
		return err
	}
	img, err := os.OpenFile(s.image(id), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer img.Close()
	return loopMount(img, target)
}

// isMountPoint reports whether dir is the root of a mount.
func isMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}

// remove unmounts a volume and deletes its image and mount point (what
// exists of them). Sandboxes that mount it keep their mounts until they
// end. The mount point is removed only once nothing is mounted there.
func (s *Store) remove(id string) error {
	target := s.Path(id)
	for {
		mounted, err := isMountPoint(target)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return err
		}
		if !mounted {
			if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove the mount point of volume %s: %w", id, err)
			}
			break
		}
		if err := unmount(target); err != nil {
			return fmt.Errorf("unmount volume %s: %w", id, err)
		}
	}
	if err := os.Remove(s.image(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Remove(filepath.Join(s.dir, id+".json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Get finds a team's volume by id or name.
func (s *Store) Get(_ context.Context, team, ref string) (Volume, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.find(team, ref)
	if v == nil {
		return Volume{}, errs.New(errs.NotFound, "volume %q not found", ref)
	}
	return *v, nil
}

func (s *Store) find(team, ref string) *Volume {
	if v := s.vols[ref]; v != nil && v.Team == team {
		return v
	}
	for _, v := range s.vols {
		if v.Team == team && v.Name == ref {
			return v
		}
	}
	return nil
}

// ByID finds a volume by id alone (the content API, whose token names it).
func (s *Store) ByID(_ context.Context, id string) (Volume, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vols[id]
	if v == nil {
		return Volume{}, errs.New(errs.NotFound, "volume %q not found", id)
	}
	return *v, nil
}

// List returns a team's volumes, oldest first.
func (s *Store) List(_ context.Context, team string) ([]Volume, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Volume
	for _, v := range s.vols {
		if v.Team == team {
			out = append(out, *v)
		}
	}
	sortVolumes(out)
	return out, nil
}

// All returns every team's volumes, oldest first.
func (s *Store) All() []Volume {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Volume
	for _, v := range s.vols {
		out = append(out, *v)
	}
	sortVolumes(out)
	return out
}

func sortVolumes(vs []Volume) {
	sort.Slice(vs, func(i, j int) bool { return vs[i].CreatedAt.Before(vs[j].CreatedAt) })
}

// Delete removes a team's volume and its files. Sandboxes that mount it
// keep it until they end.
func (s *Store) Delete(_ context.Context, team, ref string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.find(team, ref)
	if v == nil {
		return errs.New(errs.NotFound, "volume %q not found", ref)
	}
	return s.drop(v)
}

// DeleteByID removes volume id and its files; a volume not here is no
// error.
func (s *Store) DeleteByID(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.vols[id]; v != nil {
		return s.drop(v)
	}
	return nil
}

func (s *Store) drop(v *Volume) error {
	if err := s.remove(v.ID); err != nil {
		return err
	}
	delete(s.vols, v.ID)
	s.log.Info("volume deleted", "volume", v.ID, "name", v.Name)
	return nil
}

// ValidName: 1 to 64 letters, digits, '-', '_' and '.', not starting with
// '.'.
func ValidName(name string) error {
	if name == "" || len(name) > 64 || name[0] == '.' {
		return errs.New(errs.InvalidArgument, "volume name %q: 1 to 64 characters, not starting with '.'", name)
	}
	for _, c := range name {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && !strings.ContainsRune("-_.", c) {
			return errs.New(errs.InvalidArgument, "volume name %q may hold only letters, digits, '-', '_' and '.'", name)
		}
	}
	return nil
}

func validID(id string) error {
	if len(id) != 21 || id[0] != 'v' {
		return errs.New(errs.InvalidArgument, "not a volume id: %q", id)
	}
	for _, c := range id[1:] {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return errs.New(errs.InvalidArgument, "not a volume id: %q", id)
		}
	}
	return nil
}

// NewID names a new volume.
func NewID() string { return ids.New("v", 20) }

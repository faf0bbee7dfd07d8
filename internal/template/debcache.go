package template

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/covesandbox/cove/internal/isolation"
)

// The built-in recipes share a cache of Debian packages on the node
// (<data>/templates/debs): debootstrap keeps what it downloads there
// (--cache-dir), and a recipe's build step sees it read-only at
// debCacheTarget, links its packages into apt's archive directory before
// apt-get runs, and leaves there what apt-get fetched, which the builder
// moves into the cache before the step's layer is taken; the links go too
// (so no layer holds either). apt-get and debootstrap check every package against the
// archive's signed index before they use it: the cache only saves
// downloads. Only recipes use it (Spec.DebCache): a user's build neither
// reads nor fills it.
const debCacheTarget = "/var/cache/cove-debs"

// aptArchives is where apt-get keeps the packages it fetched.
const aptArchives = "var/cache/apt/archives"

// debCache is the cache's directory, made when missing.
func (b *Builder) debCache() (string, error) {
	dir := filepath.Join(b.store.dir, "debs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// hostCertsTarget is where a recipe's build step sees the node's trusted
// certificates (Builder.HostCerts), read-only.
const hostCertsTarget = "/var/cache/cove-host-certs"

// withDebCache gives a step's sandbox the cache, read-only at
// debCacheTarget, and the node's certificates at hostCertsTarget where it
// has them, over a layer that holds only those mount points.
func (b *Builder) withDebCache(t *Template) error {
	dir, err := b.debCache()
	if err != nil {
		return err
	}
	binds := []isolation.Bind{{Source: dir, Target: debCacheTarget}}
	if st, err := os.Stat(b.HostCerts); b.HostCerts != "" && err == nil && st.IsDir() {
		binds = append(binds, isolation.Bind{Source: b.HostCerts, Target: hostCertsTarget})
	}
	stage, err := b.store.layers.stage()
	if err != nil {
		return err
	}
	for _, bind := range binds {
		if err := os.MkdirAll(filepath.Join(stage, bind.Target), 0o755); err != nil {
			removeStage(stage)
			return err
		}
		for p := filepath.Join(stage, bind.Target); p != stage; p = filepath.Dir(p) {
			os.Chmod(p, 0o755) // whatever the umask left
		}
	}
	name, err := b.store.layers.commitByContent(stage)
	if err != nil {
		return err
	}
	t.RootFS.Layers = append(t.RootFS.Layers, b.store.layers.Path(name))
	t.RootFS.Binds = append(t.RootFS.Binds, binds...)
	return nil
}

// harvestDebs moves the packages a step's apt-get left in its writable
// layer (upper) into the cache. Only regular files named *.deb directly in
// apt's archive directory are taken, read through upper's root (nothing
// followed out of it); each is removed from the layer.
func (b *Builder) harvestDebs(upper string) error {
	dir, err := b.debCache()
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(upper)
	if err != nil {
		return err
	}
	defer root.Close()
	entries, err := fs.ReadDir(root.FS(), aptArchives)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		rel := aptArchives + "/" + e.Name()
		if !strings.HasSuffix(e.Name(), ".deb") {
			continue
		}
		if e.Type()&fs.ModeSymlink != 0 { // a link to the cache the step made
			if err := root.Remove(rel); err != nil {
				return err
			}
			continue
		}
		if !e.Type().IsRegular() {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, e.Name())); err != nil {
			if err := copyIn(root, rel, filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("keep %s: %w", e.Name(), err)
			}
		}
		if err := root.Remove(rel); err != nil {
			return err
		}
	}
	return nil
}

// copyIn copies rel under root to dst, through a temporary file renamed
// into place.
func copyIn(root *os.Root, rel, dst string) error {
	in, err := root.Open(rel)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(dst), ".part-")
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(out.Name())
		return err
	}
	if err := out.Chmod(0o644); err != nil {
		out.Close()
		os.Remove(out.Name())
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(out.Name())
		return err
	}
	return os.Rename(out.Name(), dst)
}

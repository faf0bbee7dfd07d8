package microvm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
)

// bindImages keeps erofs images of the host directories templates bind
// read-only (the base template's /usr), so that a guest sees such a
// directory on a disk rather than over virtiofs, which QEMU cannot save:
// such a guest can then be paused with its memory, forked and
// snapshotted with its processes.
//
// An image is of its directory as it was: one is named by a fingerprint
// of the tree (every entry's path, inode, mode, owner, size and times),
// taken again at most every recheck. While the image of the directory as
// it is now is not made (the first guest, or the host's packages
// changed), guests get the directory over virtiofs, and the image is
// made in the background. Old images are removed once no guest in the
// driver's directory (running or checkpointed) records them.
type bindImages struct {
	dir     string // the driver's imagesDir
	vmDir   string // the driver's directory, whose guests' records name images
	recheck time.Duration
	log     *slog.Logger

	ctx    context.Context // ends with the driver (Close)
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// use is held (read) from a guest's choice of its images until its
	// record names them, and (write) by prune.
	use sync.RWMutex

	mu      sync.Mutex
	sources map[string]*bindSource
}

// bindSource is what is known of one host directory.
type bindSource struct {
	image   string    // the image of the directory as it was at checked ("" none)
	checked time.Time // when its fingerprint was last taken
	busy    bool      // a check (and maybe a make) runs
}

// bindImagePrefix starts the names of bind images in imagesDir, so that
// pruneImages (of layers) leaves them to bindImages.
const bindImagePrefix = "bind-"

func newBindImages(driverDir string, recheck time.Duration, log *slog.Logger) *bindImages {
	ctx, cancel := context.WithCancel(context.Background())
	return &bindImages{dir: filepath.Join(driverDir, imagesDir), vmDir: driverDir, recheck: recheck, log: log,
		ctx: ctx, cancel: cancel, sources: map[string]*bindSource{}}
}

// image returns the image of source to give a guest now, "" for none
// (the guest then shares the directory over virtiofs). It starts a check
// of source in the background when the last one is older than recheck.
// The caller holds b.use (read).
func (b *bindImages) image(source string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sources[source]
	if s == nil {
		s = &bindSource{}
		b.sources[source] = s
	}
	if !s.busy && time.Since(s.checked) >= b.recheck && b.ctx.Err() == nil { // never checked: the zero time
		s.busy = true
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			img, err := b.refresh(source)
			if err != nil && b.ctx.Err() == nil {
				b.log.Error("image of a host directory for microVM guests", "source", source, logx.Err(err))
			}
			b.mu.Lock()
			s.image, s.checked, s.busy = img, time.Now(), false
			b.mu.Unlock()
		}()
	}
	return s.image
}

// current is the image of source a guest gets now ("" for none), as
// image says, without starting a check.
func (b *bindImages) current(source string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.sources[source]; s != nil {
		return s.image
	}
	return ""
}

// Outdated implements isolation.Outdater: sandbox id sees a read-only
// bind otherwise than a guest created now would. Its directory has had
// an image made since (a guest sharing it over virtiofs cannot be saved
// with its memory), or has changed since its image was made.
func (d *Driver) Outdated(id string) bool {
	if d.binds == nil {
		return false
	}
	s := d.get(id)
	if s == nil {
		return false
	}
	for _, sh := range s.shares {
		if !sh.Writable && sh.Image != d.binds.current(sh.Source) {
			return true
		}
	}
	return false
}

// refresh takes source's fingerprint and returns the image of the tree
// it names, made now if it is not there yet ("" when the directory
// changed while it was made; the next check tries again), and removes
// source's other images no guest records.
func (b *bindImages) refresh(source string) (string, error) {
	fp, err := fingerprint(b.ctx, source)
	if err != nil {
		return "", err
	}
	img := filepath.Join(b.dir, bindImageName(source, fp))
	if _, err := os.Stat(img); err == nil { // made before (maybe by the node before a restart)
		return img, b.prune(source, img)
	}
	// Guests share the directory as it is until its image is made.
	b.mu.Lock()
	b.sources[source].image = ""
	b.mu.Unlock()
	start := time.Now()
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
		return "", err
	}
	tmp := img + ".tmp"
	// lz4: the guest's kernel reads it; /usr takes about 60 % of its size.
	if err := makeErofs(b.ctx, source, tmp, true, "-zlz4"); err != nil {
		return "", err
	}
	again, err := fingerprint(b.ctx, source)
	if err == nil && again != fp {
		err = fmt.Errorf("%s changed while its image was made", source)
	}
	if err == nil {
		err = os.Rename(tmp, img)
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	var size int64
	if st, err := os.Stat(img); err == nil {
		size = st.Size()
	}
	b.log.Info("image of a host directory made for microVM guests", "source", source, "image", img,
		"bytes", size, "took", time.Since(start))
	return img, b.prune(source, img)
}

// bindImageName names the image of source whose tree has fingerprint fp.
func bindImageName(source, fp string) string { return sourcePrefix(source) + fp + ".erofs" }

// sourcePrefix starts the names of source's images.
func sourcePrefix(source string) string {
	sum := sha256.Sum256([]byte(source))
	return bindImagePrefix + hex.EncodeToString(sum[:8]) + "-"
}

// fingerprint hashes what the tree at root holds as lstat shows it: a
// file changed in place changes its ctime, one replaced its inode.
func fingerprint(ctx context.Context, root string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		fmt.Fprintf(h, "%q %d %o %d:%d %d %d %d %d\n", p, st.Ino, st.Mode, st.Uid, st.Gid, st.Size,
			st.Mtim.Nano(), st.Ctim.Nano(), st.Rdev)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("fingerprint of %s: %w", root, err)
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// prune removes source's images but keep and those a guest's record in
// the driver's directory names.
func (b *bindImages) prune(source, keep string) error {
	old, _ := filepath.Glob(filepath.Join(b.dir, sourcePrefix(source)+"*"))
	if len(old) == 1 && old[0] == keep {
		return nil // the usual case: no create waits on the lock
	}
	b.use.Lock()
	defer b.use.Unlock()
	inUse, err := recordedImages(b.vmDir)
	if err != nil {
		return err
	}
	for _, p := range old { // a .tmp is what a stopped make left: one make of source runs at a time
		if p == keep || inUse[p] {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// pruneBindImages, at the driver's start, removes what a stopped make of
// a bind image left and, when the driver makes none (off), the images no
// guest's record names.
func pruneBindImages(driverDir string, off bool) error {
	inUse, err := recordedImages(driverDir)
	if err != nil {
		return err
	}
	found, _ := filepath.Glob(filepath.Join(driverDir, imagesDir, bindImagePrefix+"*"))
	for _, p := range found {
		if inUse[p] || !off && !strings.HasSuffix(p, ".tmp") {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// recordedImages returns the bind images the guests' records in the
// driver's directory name.
func recordedImages(driverDir string) (map[string]bool, error) {
	recs, err := filepath.Glob(filepath.Join(driverDir, "*", recordFile))
	if err != nil {
		return nil, err
	}
	inUse := map[string]bool{}
	for _, p := range recs {
		rec, err := readRecordFile(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) { // the guest was just removed
				continue
			}
			return nil, err
		}
		for _, sh := range rec.Shares {
			if sh.Image != "" {
				inUse[sh.Image] = true
			}
		}
	}
	return inUse, nil
}

// checkSavedShares checks the shares a saved guest's record gives
// (Restore, Clone): each an image of a read-only bind among the driver's
// images (dir), still there.
func checkSavedShares(dir string, shares []HostShare) error {
	for _, sh := range shares {
		if sh.Image == "" || sh.Writable || filepath.Dir(sh.Image) != dir ||
			!strings.HasPrefix(filepath.Base(sh.Image), bindImagePrefix) {
			return errs.New(errs.InvalidArgument, "a saved guest shares %s other than by an image of this node's", sh.Source)
		}
		if _, err := os.Stat(sh.Image); err != nil {
			return errs.New(errs.Conflict, "the image of the host's %s that the guest was saved with is gone (the directory changed since): %v", sh.Source, err)
		}
	}
	return nil
}

// close ends the checks and makes under way and waits for them.
func (b *bindImages) close() {
	b.cancel()
	b.wg.Wait()
}

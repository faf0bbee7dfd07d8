package template

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/errs"
)

// The files a COPY step copies are uploaded by a team under the hash its
// client names (E2B's filesHash: a hash of the source files' paths, modes,
// sizes and contents, which the archive alone cannot reproduce). The
// client's hash is never trusted as a name for content:
//
//   - an archive is stored under the SHA-256 the server computes of its
//     bytes (files/<digest>), written once;
//   - a team's hash is bound to that digest (files/bound/<key>, the key
//     derived from the team and the hash), so another team's upload under
//     the same hash neither answers this team's question nor replaces its
//     files; a binding is never rebound to other content while its archive
//     is kept;
//   - builds copy from, and cache steps by, the digest: a cached layer is
//     reused only for content proven identical.

// MaxFilesBytes bounds one uploaded archive of a COPY step.
const MaxFilesBytes = 4 << 30

// validHash checks a files hash or digest: 64 lowercase hex digits.
func validHash(h string) error {
	if len(h) != 64 {
		return errs.New(errs.InvalidArgument, "files hash must be 64 hex digits")
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return errs.New(errs.InvalidArgument, "files hash must be 64 lowercase hex digits")
		}
	}
	return nil
}

// filesPath is where the archive whose SHA-256 is digest is kept here.
func (s *Store) filesPath(digest string) string { return filepath.Join(s.dir, "files", digest) }

// boundName names a team's binding of the client's hash: a hash of both,
// so a team's name never becomes a path.
func boundName(team, hash string) string {
	sum := sha256.Sum256([]byte("files-binding\x00" + team + "\x00" + hash))
	return hex.EncodeToString(sum[:])
}

func (s *Store) boundPath(team, hash string) string {
	return filepath.Join(s.dir, "files", "bound", boundName(team, hash))
}

// teamFilesDir lists, as empty files named by digest, the archives a
// team's bindings lead to here: what its uploads hold, counted in its
// storage (TeamFilesBytes). A mark goes with its binding, or its archive.
func (s *Store) teamFilesDir(team string) string {
	sum := sha256.Sum256([]byte("files-team\x00" + team))
	return filepath.Join(s.dir, "files", "teams", hex.EncodeToString(sum[:]))
}

// markTeamFiles records (or touches) that team's uploads hold digest.
func (s *Store) markTeamFiles(team, digest string) error {
	dir := s.teamFilesDir(team)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	p := filepath.Join(dir, digest)
	now := time.Now()
	if err := os.Chtimes(p, now, now); err == nil {
		return nil
	}
	return os.WriteFile(p, nil, 0o600)
}

// TeamFilesBytes is what the archives team uploaded and still binds hold
// here, each counted once.
func (s *Store) TeamFilesBytes(team string) (int64, error) {
	entries, err := os.ReadDir(s.teamFilesDir(team))
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var total int64
	for _, e := range entries {
		if validHash(e.Name()) != nil {
			continue
		}
		if st, err := os.Stat(s.filesPath(e.Name())); err == nil {
			total += st.Size()
		}
	}
	return total, nil
}

// filesKey is where the object store keeps the archive of a digest, and
// boundKey a team's binding of a hash to it.
func filesKey(digest string) string { return "files/" + digest }
func boundKey(name string) string   { return "files-bound/" + name }

// FilesDigest returns the digest of the archive team uploaded for the
// client's hash ("" when it uploaded none, or it is no longer kept), here
// or, in a cluster, through any API replica. Both are touched: collectFiles
// keeps what builds use.
func (s *Store) FilesDigest(ctx context.Context, team, hash string) (string, error) {
	if err := validHash(hash); err != nil {
		return "", err
	}
	digest, err := s.binding(ctx, team, hash)
	if err != nil || digest == "" {
		return "", err
	}
	ok, err := s.HasFiles(ctx, digest)
	if err != nil || !ok {
		return "", err
	}
	return digest, nil
}

// binding reads a team's binding of hash, here or in the remote.
func (s *Store) binding(ctx context.Context, team, hash string) (string, error) {
	p := s.boundPath(team, hash)
	data, err := os.ReadFile(p)
	switch {
	case err == nil:
		now := time.Now()
		os.Chtimes(p, now, now)
		if d := strings.TrimSpace(string(data)); validHash(d) == nil {
			os.Chtimes(filepath.Join(s.teamFilesDir(team), d), now, now)
		}
	case !os.IsNotExist(err):
		return "", fmt.Errorf("read files binding: %w", err)
	case s.remote == nil:
		return "", nil
	default:
		key := boundKey(boundName(team, hash))
		if ok, err := s.remote.Has(ctx, key); err != nil || !ok {
			return "", err
		}
		body, _, err := s.remote.Get(ctx, key)
		if err != nil {
			return "", fmt.Errorf("fetch files binding: %w", err)
		}
		data, err = io.ReadAll(io.LimitReader(body, 128))
		body.Close()
		if err != nil {
			return "", fmt.Errorf("fetch files binding: %w", err)
		}
	}
	digest := strings.TrimSpace(string(data))
	if validHash(digest) != nil {
		return "", errs.New(errs.DataLoss, "the files binding of %s holds no digest", hash)
	}
	return digest, nil
}

// HasFiles reports whether the archive whose SHA-256 is digest is kept:
// here, or, in a cluster, in the object store.
func (s *Store) HasFiles(ctx context.Context, digest string) (bool, error) {
	if err := validHash(digest); err != nil {
		return false, err
	}
	now := time.Now()
	if err := os.Chtimes(s.filesPath(digest), now, now); err == nil || s.remote == nil {
		return err == nil, nil
	}
	return s.remote.Has(ctx, filesKey(digest))
}

// PutFiles stores team's upload (an optionally gzipped tar, at most limit
// bytes) for the client's hash and returns the SHA-256 of its bytes, under
// which it is kept; in a cluster, in the object store too, for the node
// that builds. An upload for a hash the team bound to other content that
// is still kept is refused (Conflict): nothing is overwritten.
func (s *Store) PutFiles(ctx context.Context, team, hash string, r io.Reader, limit int64) (string, error) {
	if err := validHash(hash); err != nil {
		return "", err
	}
	digest, err := s.keepFiles(r, limit)
	if err != nil {
		return "", err
	}
	if s.remote != nil {
		if err := s.pushFiles(ctx, digest); err != nil {
			return "", err
		}
	}
	if err := s.bind(ctx, team, hash, digest); err != nil {
		return "", err
	}
	return digest, nil
}

// bind binds a team's hash to digest, unless it is bound to other content
// still kept.
func (s *Store) bind(ctx context.Context, team, hash, digest string) error {
	s.bindMu.Lock()
	defer s.bindMu.Unlock()
	was, err := s.FilesDigest(ctx, team, hash)
	switch {
	case err != nil:
		return err
	case was == digest:
		return nil
	case was != "":
		return errs.New(errs.Conflict, "files %s were uploaded already with other content (sha256 %s); they are not replaced", hash, was)
	}
	p := s.boundPath(team, hash)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(digest+"\n"), 0o600); err != nil {
		return fmt.Errorf("bind files: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("bind files: %w", err)
	}
	if err := s.markTeamFiles(team, digest); err != nil {
		return fmt.Errorf("bind files: %w", err)
	}
	if s.remote == nil {
		return nil
	}
	line := []byte(digest + "\n")
	return s.remote.Put(ctx, boundKey(boundName(team, hash)), bytes.NewReader(line), int64(len(line)))
}

// pushFiles puts a kept archive in the remote unless it is there.
func (s *Store) pushFiles(ctx context.Context, digest string) error {
	if ok, err := s.remote.Has(ctx, filesKey(digest)); err != nil || ok {
		return err
	}
	f, err := os.Open(s.filesPath(digest))
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return s.remote.Put(ctx, filesKey(digest), f, st.Size())
}

// localFiles makes sure the archive of digest is on this node, fetching
// it from the object store when another process took the upload; bytes
// that do not match the digest are refused (DataLoss) and leave nothing.
func (s *Store) localFiles(ctx context.Context, digest string) error {
	if _, err := os.Stat(s.filesPath(digest)); err == nil || s.remote == nil {
		return nil
	}
	body, _, err := s.remote.Get(ctx, filesKey(digest))
	if err != nil {
		return fmt.Errorf("fetch files %s: %w", digest, err)
	}
	defer body.Close()
	got, err := s.keepFiles(body, MaxFilesBytes)
	if err != nil {
		return fmt.Errorf("fetch files %s: %w", digest, err)
	}
	if got != digest {
		os.Remove(s.filesPath(got))
		return errs.New(errs.DataLoss, "the object store's files %s hold content of sha256 %s", digest, got)
	}
	return nil
}

// keepFiles stores an archive here under the SHA-256 of its bytes, which
// it returns; an archive already kept is left as it is.
func (s *Store) keepFiles(r io.Reader, limit int64) (string, error) {
	f, err := os.CreateTemp(filepath.Join(s.dir, "files"), ".upload-")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("store files: %w", err)
	}
	if n > limit {
		return "", errs.New(errs.InvalidArgument, "files archive is larger than %d bytes", limit)
	}
	digest := hex.EncodeToString(h.Sum(nil))
	if _, err := os.Stat(s.filesPath(digest)); err == nil {
		now := time.Now()
		return digest, os.Chtimes(s.filesPath(digest), now, now)
	}
	return digest, os.Rename(f.Name(), s.filesPath(digest))
}

// filesKeep is how long an uploaded archive, or a binding, no build asked
// for is kept; a client uploads it again when it is gone.
const filesKeep = 24 * time.Hour

// collectFiles removes uploaded archives and bindings untouched for
// filesKeep.
func (s *Store) collectFiles() {
	dirs := []string{filepath.Join(s.dir, "files"), filepath.Join(s.dir, "files", "bound")}
	teams, _ := os.ReadDir(filepath.Join(s.dir, "files", "teams"))
	for _, e := range teams {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(s.dir, "files", "teams", e.Name()))
		}
	}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if info, err := e.Info(); err == nil && info.Mode().IsRegular() && time.Since(info.ModTime()) > filesKeep {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
}

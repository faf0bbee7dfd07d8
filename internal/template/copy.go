package template

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/layertar"
	cove "github.com/covesandbox/cove/sdk/go"
)

// copyLayer makes the layer of a COPY step: args [src, dest, user?, mode?]
// over the uploaded archive step.FilesHash. The source is a path (its last
// element may be a glob) inside the archive; it may not leave it, neither
// by ".." nor through a symlink, and symlinks are copied as links.
func (b *Builder) copyLayer(ctx context.Context, st state, step Step, budget *fsutil.Budget) (string, error) {
	if len(step.Args) < 2 {
		return "", errs.New(errs.InvalidArgument, "COPY takes a source and a destination")
	}
	src, dest := step.Args[0], step.Args[1]
	if ok, err := b.store.HasFiles(ctx, step.FilesHash); err != nil {
		return "", err
	} else if !ok {
		return "", errs.New(errs.InvalidArgument, "the files of COPY %s (%s) were not uploaded", src, step.FilesHash)
	}
	if err := b.store.localFiles(ctx, step.FilesHash); err != nil {
		return "", err
	}
	// The files belong to the user named, or to the user the build is at
	// (a Dockerfile's COPY without --chown names root).
	user := st.User
	if len(step.Args) > 2 && step.Args[2] != "" {
		user = step.Args[2]
	}
	owner, err := b.lookupIDs(st, user)
	if err != nil {
		return "", err
	}
	var mode os.FileMode
	if len(step.Args) > 3 && step.Args[3] != "" {
		m, err := strconv.ParseUint(step.Args[3], 8, 32)
		if err != nil || m > 0o7777 {
			return "", errs.New(errs.InvalidArgument, "COPY mode %q is not an octal mode", step.Args[3])
		}
		mode = os.FileMode(m) & os.ModePerm
	}

	ctxDir, err := os.MkdirTemp(b.store.dir, "build-")
	if err != nil {
		return "", err
	}
	defer fsutil.RemoveTree(ctxDir)
	archive, err := os.Open(b.store.filesPath(step.FilesHash))
	if err != nil {
		return "", err
	}
	// The archive unpacks into scratch space, bounded by what the build
	// may still store (its layer is charged once committed).
	scratch := &fsutil.Budget{Max: budget.Left(), Dir: b.store.dir, MinFree: budget.MinFree, What: "the files of COPY " + src + " (with what the build may still store)"}
	err = layertar.Unpack(archive, ctxDir, layertar.UnpackOptions{Budget: scratch})
	archive.Close()
	if err != nil {
		if k := errs.KindOf(err); k == errs.QuotaExceeded || k == errs.ResourceExhausted {
			return "", err
		}
		return "", errs.New(errs.InvalidArgument, "files of COPY %s: %v", src, err)
	}
	matches, err := cove.MatchContext(ctxDir, src)
	if err != nil {
		return "", errs.New(errs.InvalidArgument, "COPY: %v", err)
	}

	if !path.IsAbs(dest) {
		dest = path.Join(st.Workdir, dest)
	}
	intoDir := strings.HasSuffix(step.Args[1], "/") || len(matches) > 1
	destRel := strings.TrimPrefix(path.Clean(dest), "/")
	stage, err := b.store.layers.stage()
	if err != nil {
		return "", err
	}
	fail := func(err error) (string, error) { removeStage(stage); return "", err }
	opts := fsutil.CopyOptions{Owner: &owner, Mode: mode}
	for _, m := range matches {
		fi, err := os.Lstat(m)
		if err != nil {
			return fail(err)
		}
		if fi.IsDir() { // a directory's contents go into dest
			if err := b.mkParents(st, stage, destRel, owner); err != nil {
				return fail(err)
			}
			entries, err := os.ReadDir(m)
			if err != nil {
				return fail(err)
			}
			for _, e := range entries {
				if err := copyInto(filepath.Join(m, e.Name()), filepath.Join(stage, destRel, e.Name()), opts); err != nil {
					return fail(err)
				}
			}
			continue
		}
		target := destRel
		if intoDir {
			target = path.Join(destRel, filepath.Base(m))
		}
		if parent := path.Dir(target); parent != "." {
			if err := b.mkParents(st, stage, parent, owner); err != nil {
				return fail(err)
			}
		}
		if err := copyInto(m, filepath.Join(stage, target), opts); err != nil {
			return fail(err)
		}
	}
	return b.store.layers.commitByContent(stage)
}

// copyInto copies src to dst, replacing what an earlier source put there.
func copyInto(src, dst string, opts fsutil.CopyOptions) error {
	if _, err := os.Lstat(dst); err == nil {
		if err := fsutil.RemoveTree(dst); err != nil {
			return err
		}
		os.Remove(dst)
	}
	return fsutil.CopyTree(src, dst, opts)
}

// lookupIDs resolves "user", "uid", "user:group" or "uid:gid" through the
// layers' /etc/passwd and /etc/group.
func (b *Builder) lookupIDs(st state, spec string) (fsutil.Ids, error) {
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	var ids fsutil.Ids
	passwd, _ := b.store.layers.readFile(st.Layers, "etc/passwd")
	if uid, err := strconv.Atoi(userPart); err == nil {
		ids.UID, ids.GID = uid, uid
	} else if f, ok := findEntry(passwd, userPart); ok && len(f) > 3 {
		ids.UID, _ = strconv.Atoi(f[2])
		ids.GID, _ = strconv.Atoi(f[3])
	} else if userPart == "root" {
		ids = fsutil.Ids{}
	} else {
		return ids, errs.New(errs.InvalidArgument, "user %s is not in the template's /etc/passwd", userPart)
	}
	if hasGroup {
		group, _ := b.store.layers.readFile(st.Layers, "etc/group")
		if gid, err := strconv.Atoi(groupPart); err == nil {
			ids.GID = gid
		} else if f, ok := findEntry(group, groupPart); ok && len(f) > 2 {
			ids.GID, _ = strconv.Atoi(f[2])
		} else {
			return ids, errs.New(errs.InvalidArgument, "group %s is not in the template's /etc/group", groupPart)
		}
	}
	return ids, nil
}

// findEntry finds the colon-separated line whose first field is name.
func findEntry(file []byte, name string) ([]string, bool) {
	for _, line := range strings.Split(string(file), "\n") {
		f := strings.Split(line, ":")
		if len(f) > 0 && f[0] == name {
			return f, true
		}
	}
	return nil, false
}

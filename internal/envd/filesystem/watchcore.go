package filesystem

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"

	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/filesystem"
)

// dirWatch turns fsnotify events under one directory into FilesystemEvents
// named relative to it; recursive watches follow new subdirectories.
type dirWatch struct {
	root         string
	recursive    bool
	includeEntry bool
	w            *fsnotify.Watcher
	// uploaded holds files an upload's temporary file was just renamed
	// to: their Create is reported as a create and a write, as a write
	// in place would be.
	uploaded map[string]bool
}

// UploadTempPrefix and UploadTempSuffix frame the name of the file an
// upload writes beside its target (".<name>.upload-<random>") before it
// renames it there; watchers do not report it.
const (
	UploadTempPrefix = "."
	UploadTempSuffix = ".upload-"
)

// uploadTarget returns the file an upload's temporary file at p stands
// for, ok false if p is not one.
func uploadTarget(p string) (string, bool) {
	base := filepath.Base(p)
	i := strings.LastIndex(base, UploadTempSuffix)
	if i <= len(UploadTempPrefix) || !strings.HasPrefix(base, UploadTempPrefix) {
		return "", false
	}
	return filepath.Join(filepath.Dir(p), base[len(UploadTempPrefix):i]), true
}

func newDirWatch(root string, recursive, includeEntry bool) (*dirWatch, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, PathError(root, err)
	}
	if !st.IsDir() {
		return nil, errs.New(errs.InvalidArgument, "path '%s' is not a directory", root)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, errs.New(errs.ResourceExhausted, "create watcher: %v", err)
	}
	d := &dirWatch{root: root, recursive: recursive, includeEntry: includeEntry, w: w}
	if err := d.add(root); err != nil {
		w.Close()
		return nil, err
	}
	return d, nil
}

// add watches dir, and with recursion every directory below it.
func (d *dirWatch) add(dir string) error {
	if !d.recursive {
		if err := d.w.Add(dir); err != nil {
			return errs.New(errs.Internal, "watch %s: %v", dir, err)
		}
		return nil
	}
	return filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || !de.IsDir() {
			return nil
		}
		if err := d.w.Add(p); err != nil {
			return errs.New(errs.Internal, "watch %s: %v", p, err)
		}
		return nil
	})
}

// convert maps one fsnotify event to what to report: none for an upload's
// temporary file, a create and a write where one was renamed into place.
func (d *dirWatch) convert(ev fsnotify.Event) []*pb.FilesystemEvent {
	if target, ok := uploadTarget(ev.Name); ok {
		if ev.Has(fsnotify.Rename) {
			if d.uploaded == nil {
				d.uploaded = map[string]bool{}
			}
			d.uploaded[target] = true
		}
		return nil
	}
	fe, ok := d.convertOne(ev)
	if !ok {
		return nil
	}
	out := []*pb.FilesystemEvent{fe}
	if ev.Has(fsnotify.Create) && d.uploaded[ev.Name] {
		delete(d.uploaded, ev.Name)
		w := &pb.FilesystemEvent{Name: fe.Name, Type: pb.EventType_EVENT_TYPE_WRITE, Entry: fe.Entry}
		out = append(out, w)
	}
	return out
}

// convertOne maps one fsnotify event; ok is false for events to skip.
func (d *dirWatch) convertOne(ev fsnotify.Event) (*pb.FilesystemEvent, bool) {
	var t pb.EventType
	switch {
	case ev.Has(fsnotify.Create):
		t = pb.EventType_EVENT_TYPE_CREATE
		if d.recursive {
			if st, err := os.Lstat(ev.Name); err == nil && st.IsDir() {
				_ = d.add(ev.Name)
			}
		}
	case ev.Has(fsnotify.Write):
		t = pb.EventType_EVENT_TYPE_WRITE
	case ev.Has(fsnotify.Remove):
		t = pb.EventType_EVENT_TYPE_REMOVE
	case ev.Has(fsnotify.Rename):
		t = pb.EventType_EVENT_TYPE_RENAME
	case ev.Has(fsnotify.Chmod):
		t = pb.EventType_EVENT_TYPE_CHMOD
	default:
		return nil, false
	}
	name, err := filepath.Rel(d.root, ev.Name)
	if err != nil {
		name = ev.Name
	}
	out := &pb.FilesystemEvent{Name: name, Type: t}
	if d.includeEntry && t != pb.EventType_EVENT_TYPE_REMOVE && t != pb.EventType_EVENT_TYPE_RENAME {
		if e, err := Entry(ev.Name); err == nil {
			out.Entry = e
		}
	}
	return out, true
}

func (d *dirWatch) close() { d.w.Close() }

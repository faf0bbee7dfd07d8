package filesystem

import (
	"io/fs"
	"os"
	"path/filepath"

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

// convert maps one fsnotify event to what to report (none: skip it). An
// upload through the files API is written in place, so its events are the
// file system's own, as on E2B (envd.writeInPlace).
func (d *dirWatch) convert(ev fsnotify.Event) []*pb.FilesystemEvent {
	fe, ok := d.convertOne(ev)
	if !ok {
		return nil
	}
	return []*pb.FilesystemEvent{fe}
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

package cove

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"time"

	"connectrpc.com/connect"

	pb "github.com/covesandbox/cove/sdk/go/envdpb/filesystem"
	"github.com/covesandbox/cove/sdk/go/envdpb/filesystem/filesystemconnect"
)

// Files reads and writes a sandbox's file system.
type Files struct {
	s    *Sandbox
	rpc  filesystemconnect.FilesystemClient
	user string
}

// As returns Files acting as user ("user" or "root").
func (f *Files) As(user string) *Files {
	c := *f
	c.user = user
	return &c
}

// EntryInfo describes a file, directory or symlink.
type EntryInfo struct {
	Name          string
	Path          string
	Type          string // "file", "dir" or "symlink"
	Size          int64
	Mode          fs.FileMode
	Permissions   string
	Owner, Group  string
	ModTime       time.Time
	SymlinkTarget string
}

func entry(e *pb.EntryInfo) EntryInfo {
	t := map[pb.FileType]string{pb.FileType_FILE_TYPE_FILE: "file", pb.FileType_FILE_TYPE_DIRECTORY: "dir", pb.FileType_FILE_TYPE_SYMLINK: "symlink"}[e.GetType()]
	return EntryInfo{Name: e.GetName(), Path: e.GetPath(), Type: t, Size: e.GetSize(), Mode: fs.FileMode(e.GetMode()),
		Permissions: e.GetPermissions(), Owner: e.GetOwner(), Group: e.GetGroup(), ModTime: e.GetModifiedTime().AsTime(),
		SymlinkTarget: e.GetSymlinkTarget()}
}

func rpcReq[T any](f *Files, msg *T) *connect.Request[T] {
	r := connect.NewRequest(msg)
	userHeader(r.Header(), f.user)
	return r
}

func (f *Files) filesURL(path string) string {
	q := url.Values{"path": {path}}
	if f.user != "" {
		q.Set("username", f.user)
	}
	return f.s.client.sandboxURL + "/files?" + q.Encode()
}

// Read opens a file for reading; the caller closes it.
func (f *Files) Read(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.filesURL(path), nil)
	if err != nil {
		return nil, err
	}
	// Raw bytes: Go's transport would ask for gzip on its own, and
	// compressing costs the agent more than the bytes cost the network.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := f.s.envd.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, transportErr(err))
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, fmt.Errorf("read %s: %w", path, apiError(resp))
	}
	return resp.Body, nil
}

// ReadFile returns a file's contents.
func (f *Files) ReadFile(ctx context.Context, path string) ([]byte, error) {
	r, err := f.Read(ctx, path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// Write stores r's contents at path (creating parent directories,
// replacing an existing file), streaming.
func (f *Files) Write(ctx context.Context, path string, r io.Reader) (EntryInfo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.filesURL(path), r)
	if err != nil {
		return EntryInfo{}, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := f.s.envd.Do(req)
	if err != nil {
		return EntryInfo{}, fmt.Errorf("write %s: %w", path, transportErr(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return EntryInfo{}, fmt.Errorf("write %s: %w", path, apiError(resp))
	}
	var out []struct {
		Path, Name, Type string
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out) == 0 {
		return EntryInfo{}, fmt.Errorf("write %s: unexpected answer", path)
	}
	return EntryInfo{Path: out[0].Path, Name: out[0].Name, Type: out[0].Type}, nil
}

// WriteFile stores data at path.
func (f *Files) WriteFile(ctx context.Context, path string, data []byte) error {
	_, err := f.Write(ctx, path, bytes.NewReader(data))
	return err
}

// List lists a directory; depth 1 is its entries, 2 adds theirs, ….
func (f *Files) List(ctx context.Context, path string, depth int) ([]EntryInfo, error) {
	resp, err := f.rpc.ListDir(ctx, rpcReq(f, &pb.ListDirRequest{Path: path, Depth: uint32(max(depth, 1))}))
	if err != nil {
		return nil, rpcError("list "+path, err)
	}
	out := make([]EntryInfo, 0, len(resp.Msg.GetEntries()))
	for _, e := range resp.Msg.GetEntries() {
		out = append(out, entry(e))
	}
	return out, nil
}

// Stat describes a path; a missing one is ErrNotFound.
func (f *Files) Stat(ctx context.Context, path string) (EntryInfo, error) {
	resp, err := f.rpc.Stat(ctx, rpcReq(f, &pb.StatRequest{Path: path}))
	if err != nil {
		return EntryInfo{}, rpcError("stat "+path, err)
	}
	return entry(resp.Msg.GetEntry()), nil
}

// Exists reports whether path exists.
func (f *Files) Exists(ctx context.Context, path string) (bool, error) {
	_, err := f.Stat(ctx, path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return false, err
}

// MakeDir creates a directory and its parents; created is false when it
// existed already.
func (f *Files) MakeDir(ctx context.Context, path string) (created bool, err error) {
	_, err = f.rpc.MakeDir(ctx, rpcReq(f, &pb.MakeDirRequest{Path: path}))
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		return false, nil
	}
	if err != nil {
		return false, rpcError("make directory "+path, err)
	}
	return true, nil
}

// Rename moves a file or directory.
func (f *Files) Rename(ctx context.Context, from, to string) (EntryInfo, error) {
	resp, err := f.rpc.Move(ctx, rpcReq(f, &pb.MoveRequest{Source: from, Destination: to}))
	if err != nil {
		return EntryInfo{}, rpcError("rename "+from, err)
	}
	return entry(resp.Msg.GetEntry()), nil
}

// Remove deletes a path and everything under it.
func (f *Files) Remove(ctx context.Context, path string) error {
	_, err := f.rpc.Remove(ctx, rpcReq(f, &pb.RemoveRequest{Path: path}))
	return rpcError("remove "+path, err)
}

// FilesystemEvent is a change under a watched directory.
type FilesystemEvent struct {
	Name string // relative to the watched directory
	Type string // "create", "write", "remove", "rename", "chmod"
}

// Watcher delivers a directory's events until closed.
type Watcher struct {
	Events <-chan FilesystemEvent
	cancel context.CancelFunc
	errc   chan error
}

// Close stops watching and returns why the watch ended, if it failed.
func (w *Watcher) Close() error {
	w.cancel()
	for range w.Events {
	}
	return <-w.errc
}

// Watch watches a directory (and below, when recursive) until ctx ends or
// the watcher is closed.
func (f *Files) Watch(ctx context.Context, path string, recursive bool) (*Watcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	req := rpcReq(f, &pb.WatchDirRequest{Path: path, Recursive: recursive})
	req.Header().Set("Keepalive-Ping-Interval", "50")
	stream, err := f.rpc.WatchDir(ctx, req)
	if err != nil {
		cancel()
		return nil, rpcError("watch "+path, err)
	}
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		err := rpcError("watch "+path, stream.Err())
		cancel()
		if err == nil {
			err = fmt.Errorf("watch %s: no start event", path)
		}
		return nil, err
	}
	events := make(chan FilesystemEvent, 64)
	w := &Watcher{Events: events, cancel: cancel, errc: make(chan error, 1)}
	names := map[pb.EventType]string{pb.EventType_EVENT_TYPE_CREATE: "create", pb.EventType_EVENT_TYPE_WRITE: "write",
		pb.EventType_EVENT_TYPE_REMOVE: "remove", pb.EventType_EVENT_TYPE_RENAME: "rename", pb.EventType_EVENT_TYPE_CHMOD: "chmod"}
	go func() {
		defer close(events)
		for stream.Receive() {
			if fe := stream.Msg().GetFilesystem(); fe != nil {
				select {
				case events <- FilesystemEvent{Name: fe.GetName(), Type: names[fe.GetType()]}:
				case <-ctx.Done():
				}
			}
		}
		err := stream.Err()
		if ctx.Err() != nil {
			err = nil // closed by the caller
		}
		w.errc <- rpcError("watch "+path, err)
	}()
	return w, nil
}

package envd_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/testutil/testkit"
	fspb "github.com/covesandbox/cove/sdk/go/envdpb/filesystem"
)

func TestFilesystemRPCs(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte("12345"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("file", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}

	st, err := a.fs.Stat(ctx(t), req(&fspb.StatRequest{Path: filepath.Join(dir, "file")}))
	if err != nil {
		t.Fatal(err)
	}
	e := st.Msg.GetEntry()
	if e.GetName() != "file" || e.GetType() != fspb.FileType_FILE_TYPE_FILE || e.GetSize() != 5 ||
		e.GetPermissions() != "-rw-r-----" || e.GetMode() != 0o640 || e.GetOwner() != "root" || e.GetModifiedTime() == nil {
		t.Errorf("stat: %v", e)
	}
	link, err := a.fs.Stat(ctx(t), req(&fspb.StatRequest{Path: filepath.Join(dir, "link")}))
	if err != nil || link.Msg.GetEntry().GetSymlinkTarget() != filepath.Join(dir, "file") {
		t.Errorf("stat of a symlink: %v %v", link, err)
	}

	errorCases := []struct {
		name string
		call func() error
		want connect.Code
	}{
		{"stat missing", func() error {
			_, err := a.fs.Stat(ctx(t), req(&fspb.StatRequest{Path: filepath.Join(dir, "missing")}))
			return err
		}, connect.CodeNotFound},
		{"make existing dir", func() error {
			_, err := a.fs.MakeDir(ctx(t), req(&fspb.MakeDirRequest{Path: dir}))
			return err
		}, connect.CodeAlreadyExists},
		{"make dir over a file", func() error {
			_, err := a.fs.MakeDir(ctx(t), req(&fspb.MakeDirRequest{Path: filepath.Join(dir, "file")}))
			return err
		}, connect.CodeInvalidArgument},
		{"list a file", func() error {
			_, err := a.fs.ListDir(ctx(t), req(&fspb.ListDirRequest{Path: filepath.Join(dir, "file")}))
			return err
		}, connect.CodeInvalidArgument},
		{"list missing", func() error {
			_, err := a.fs.ListDir(ctx(t), req(&fspb.ListDirRequest{Path: filepath.Join(dir, "missing")}))
			return err
		}, connect.CodeNotFound},
		{"move missing", func() error {
			_, err := a.fs.Move(ctx(t), req(&fspb.MoveRequest{Source: filepath.Join(dir, "missing"), Destination: filepath.Join(dir, "x")}))
			return err
		}, connect.CodeNotFound},
		{"unknown user", func() error {
			_, err := a.fs.Stat(ctx(t), req(&fspb.StatRequest{Path: dir}, "Authorization", basic("nosuchuser")))
			return err
		}, connect.CodeUnauthenticated},
		{"empty path", func() error {
			_, err := a.fs.Stat(ctx(t), req(&fspb.StatRequest{}))
			return err
		}, connect.CodeInvalidArgument},
		{"unknown watcher", func() error {
			_, err := a.fs.GetWatcherEvents(ctx(t), req(&fspb.GetWatcherEventsRequest{WatcherId: "nope"}))
			return err
		}, connect.CodeNotFound},
	}
	for _, tc := range errorCases {
		if err := tc.call(); connect.CodeOf(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	nested := filepath.Join(dir, "a/b/c")
	mk, err := a.fs.MakeDir(ctx(t), req(&fspb.MakeDirRequest{Path: nested}))
	if err != nil || mk.Msg.GetEntry().GetType() != fspb.FileType_FILE_TYPE_DIRECTORY {
		t.Fatalf("make nested dir: %v %v", mk, err)
	}
	mv, err := a.fs.Move(ctx(t), req(&fspb.MoveRequest{Source: filepath.Join(dir, "file"), Destination: filepath.Join(dir, "a/b/moved")}))
	if err != nil || mv.Msg.GetEntry().GetPath() != filepath.Join(dir, "a/b/moved") {
		t.Fatalf("move: %v %v", mv, err)
	}
	for depth, want := range map[uint32]int{0: 2, 1: 2, 2: 3, 3: 5} { // a, link; +b; +c, moved
		ls, err := a.fs.ListDir(ctx(t), req(&fspb.ListDirRequest{Path: dir, Depth: depth}))
		if err != nil || len(ls.Msg.GetEntries()) != want {
			t.Errorf("list depth %d: %d entries, want %d (%v)", depth, len(ls.Msg.GetEntries()), want, err)
		}
	}
	if _, err := a.fs.Remove(ctx(t), req(&fspb.RemoveRequest{Path: filepath.Join(dir, "a")})); err != nil {
		t.Fatal(err)
	}
	if _, err := a.fs.Remove(ctx(t), req(&fspb.RemoveRequest{Path: filepath.Join(dir, "a")})); err != nil {
		t.Errorf("remove of a missing path: %v, want success", err)
	}
	// "~" resolves to the user's home.
	home, err := a.fs.Stat(ctx(t), req(&fspb.StatRequest{Path: "~"}, "Authorization", basic("root")))
	if err != nil || home.Msg.GetEntry().GetPath() != "/root" {
		t.Errorf("stat ~ as root: %v %v", home, err)
	}
}

func TestWatchDirAndPolledWatcher(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	dir := t.TempDir()
	s, err := a.fs.WatchDir(ctx(t), req(&fspb.WatchDirRequest{Path: dir, Recursive: true, IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Receive() || s.Msg().GetStart() == nil {
		t.Fatalf("first WatchDir message is not start: %v %v", s.Msg(), s.Err())
	}
	w, err := a.fs.CreateWatcher(ctx(t), req(&fspb.CreateWatcherRequest{Path: dir}))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := map[fspb.EventType]bool{}
	for len(got) < 1 && s.Receive() {
		if fe := s.Msg().GetFilesystem(); fe != nil && fe.GetName() == "new.txt" {
			got[fe.GetType()] = true
			if fe.GetType() == fspb.EventType_EVENT_TYPE_CREATE && fe.GetEntry().GetName() != "new.txt" {
				t.Errorf("create event without its entry: %v", fe)
			}
		}
	}
	if !got[fspb.EventType_EVENT_TYPE_CREATE] {
		t.Errorf("no create event: %v", got)
	}
	// An upload, written in place, shows as its file's create, chmod and
	// write (TestUploadEvents has their order), and as nothing else.
	if code, body := upload(t, a, filepath.Join(dir, "up.txt"), []byte("y")); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	got = map[fspb.EventType]bool{}
	for len(got) < 3 && s.Receive() {
		fe := s.Msg().GetFilesystem()
		switch {
		case fe == nil || fe.GetName() == "new.txt":
		case fe.GetName() == "up.txt":
			got[fe.GetType()] = true
		default:
			t.Errorf("an upload reported %v", fe)
		}
	}
	if !got[fspb.EventType_EVENT_TYPE_CREATE] || !got[fspb.EventType_EVENT_TYPE_CHMOD] || !got[fspb.EventType_EVENT_TYPE_WRITE] {
		t.Errorf("upload events: %v, want create, chmod and write", got)
	}
	var events []*fspb.FilesystemEvent
	testkit.Wait(5*time.Second, func() bool {
		r, err := a.fs.GetWatcherEvents(ctx(t), req(&fspb.GetWatcherEventsRequest{WatcherId: w.Msg.GetWatcherId()}))
		if err != nil {
			t.Fatal(err)
		}
		events = r.Msg.GetEvents()
		return len(events) > 0
	})
	if len(events) == 0 || events[0].GetName() != "new.txt" {
		t.Errorf("polled watcher events: %v", events)
	}
	if _, err := a.fs.RemoveWatcher(ctx(t), req(&fspb.RemoveWatcherRequest{WatcherId: w.Msg.GetWatcherId()})); err != nil {
		t.Fatal(err)
	}
	if _, err := a.fs.RemoveWatcher(ctx(t), req(&fspb.RemoveWatcherRequest{WatcherId: w.Msg.GetWatcherId()})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("second RemoveWatcher: %v, want not_found", err)
	}
}

package layertar

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRoundTrip packs a layer with every kind of entry and unpacks it:
// the tree comes back the same, a directory the overlay marked opaque in
// its own form is marked in both, and specials are left out or refused.
func TestRoundTrip(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("whiteouts and owners need root")
	}
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(src+"/d/opaque", 0o750))
	must(os.Mkdir(src+"/d/lowers", 0o755))
	must(os.WriteFile(src+"/d/f", []byte("data"), 0o640))
	must(os.Chown(src+"/d/f", 1000, 1001))
	must(os.Link(src+"/d/f", src+"/d/hard"))
	must(os.Symlink("../etc/passwd", src+"/d/link"))
	must(unix.Mknod(src+"/d/gone", unix.S_IFCHR, 0))
	must(unix.Setxattr(src+"/d/opaque", "trusted.overlay.opaque", []byte("y"), 0))
	// A lower layer's marker, copied up: not this layer's.
	must(unix.Setxattr(src+"/d/lowers", "user.overlay.opaque", []byte("y"), 0))
	must(unix.Mkfifo(src+"/d/fifo", 0o600))

	var buf bytes.Buffer
	if err := Pack(&buf, src, PackOptions{Opaque: "trusted.overlay.opaque"}); err == nil || !strings.Contains(err.Error(), "cannot be packed") {
		t.Fatalf("a fifo packed: %v", err)
	}
	buf.Reset()
	must(Pack(&buf, src, PackOptions{Opaque: "trusted.overlay.opaque", SkipSpecial: true}))
	dst := t.TempDir()
	must(Unpack(&buf, dst, UnpackOptions{Overlay: true, Exact: true}))

	var st, st2 unix.Stat_t
	must(unix.Lstat(dst+"/d/f", &st))
	if b, _ := os.ReadFile(dst + "/d/f"); string(b) != "data" || st.Uid != 1000 || st.Gid != 1001 || st.Mode&0o7777 != 0o640 {
		t.Errorf("the file: %q %d:%d %o", b, st.Uid, st.Gid, st.Mode&0o7777)
	}
	must(unix.Lstat(dst+"/d/hard", &st2))
	if st2.Ino != st.Ino {
		t.Error("the hard link is a copy")
	}
	if l, err := os.Readlink(dst + "/d/link"); err != nil || l != "../etc/passwd" {
		t.Errorf("the link: %q %v", l, err)
	}
	must(unix.Lstat(dst+"/d/gone", &st))
	if st.Mode&syscall.S_IFMT != syscall.S_IFCHR || st.Rdev != 0 {
		t.Errorf("the whiteout: %o %d", st.Mode, st.Rdev)
	}
	for _, x := range opaqueXattrs {
		if !IsMarked(dst+"/d/opaque", x) {
			t.Errorf("the opaque directory lacks %s", x)
		}
		if IsMarked(dst+"/d/lowers", x) {
			t.Errorf("a lower layer's marker became %s", x)
		}
	}
	if _, err := os.Lstat(dst + "/d/fifo"); !os.IsNotExist(err) {
		t.Errorf("the fifo: %v", err)
	}
	must(unix.Lstat(dst+"/d/opaque", &st))
	if st.Mode&0o7777 != 0o750 {
		t.Errorf("the directory's mode: %o", st.Mode&0o7777)
	}
}

// TestUnpackStaysInside: names that climb and links that lead out of the
// directory write nothing outside it.
func TestUnpackStaysInside(t *testing.T) {
	outside := t.TempDir()
	for name, entries := range map[string][]tar.Header{
		"dot-dot": {{Name: "../../" + filepath.Base(outside) + "/x", Typeflag: tar.TypeReg, Mode: 0o644}},
		"through a link": {
			{Name: "l", Typeflag: tar.TypeSymlink, Linkname: outside},
			{Name: "l/x", Typeflag: tar.TypeReg, Mode: 0o644},
		},
		"hard link out": {{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../../../etc/passwd"}},
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, h := range entries {
				if err := tw.WriteHeader(&h); err != nil {
					t.Fatal(err)
				}
			}
			tw.Close()
			dir := t.TempDir()
			_ = Unpack(&buf, dir, UnpackOptions{Overlay: true})
			if _, err := os.Lstat(outside + "/x"); !os.IsNotExist(err) {
				t.Fatalf("wrote outside: %v", err)
			}
			if st, err := os.Lstat(dir + "/h"); err == nil && st.Mode().IsRegular() {
				if b, _ := os.ReadFile(dir + "/h"); bytes.Contains(b, []byte("root:")) {
					t.Fatal("a hard link reached /etc/passwd")
				}
			}
		})
	}
}

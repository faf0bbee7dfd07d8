// Package template provides sandbox root file systems. A template is an
// ordered list of read-only layers, content-addressed on disk and shared by
// every sandbox that uses it. The built-in "base" template needs nothing
// from the network: the host's /usr (and /bin, /sbin, /lib* where they are
// real directories) bound read-only under a small layer with Cove's own /etc.
package template

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
)

// BaseName is the built-in base template's name, and the host
// template's id: the name serves the host template, or the recipe
// Store.SetBase hands it to (E2B's base, built from Debian's archive).
const BaseName = "base"

// HostName names the host template (id BaseName) whoever holds BaseName.
const HostName = "host"

// UserUID is the uid (and gid) of the sandbox's "user" account.
const UserUID = 1000

// hostEtc are the host /etc entries the base template copies: what
// dynamic linking, locales, TLS roots, shells and alternatives need, and
// the settings Debian's matplotlib, R, JDK and X11 desktop (fonts, the
// XDG and XFCE defaults) keep there. No secrets
// (shadow, ssh keys, ssl/private) are copied. Patterns are globs.
var hostEtc = []string{"matplotlibrc", "R", "java-*",
	"alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf", "debian_version",
	"environment", "ethertypes", "gai.conf", "host.conf", "inputrc", "ld.so.cache", "ld.so.conf",
	"ld.so.conf.d", "locale.alias", "locale.gen", "localtime", "login.defs", "magic", "magic.mime",
	"mime.types", "networks", "os-release", "profile", "profile.d", "protocols", "python3",
	"python3.11", "rpc", "services", "skel", "ssl", "terminfo", "timezone", "X11", "xdg", "fonts",
}

// skipEtc are never copied even inside a listed directory.
var skipEtc = map[string]bool{"ssl/private": true}

// BaseBinds are the host directories the base template binds read-only.
func BaseBinds() []isolation.Bind {
	binds := []isolation.Bind{{Source: "/usr", Target: "/usr"}}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		if st, err := os.Lstat(d); err == nil && st.IsDir() {
			binds = append(binds, isolation.Bind{Source: d, Target: d})
		}
	}
	return binds
}

// BaseCommands are what E2B's base template has and code written for it
// calls, with the Debian package of each: base has them when the host's
// /usr does (make run installs them).
var BaseCommands = [][2]string{
	{"bash", "bash"}, {"python3", "python3"}, {"node", "nodejs"}, {"npm", "npm"}, {"git", "git"},
	{"curl", "curl"}, {"tput", "ncurses-bin"}, {"gcc", "build-essential"}, {"make", "build-essential"},
}

// MissingBaseCommands returns the Debian packages whose commands the base
// template lacks: neither /usr/bin nor /bin of the host has them.
func MissingBaseCommands() []string { return missingCommands("/") }

func missingCommands(root string) []string {
	var pkgs []string
	for _, c := range BaseCommands {
		found := false
		for _, dir := range []string{"usr/bin", "bin", "usr/local/bin"} {
			if st, err := os.Stat(filepath.Join(root, dir, c[0])); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				found = true
				break
			}
		}
		if !found && !slices.Contains(pkgs, c[1]) {
			pkgs = append(pkgs, c[1])
		}
	}
	return pkgs
}

// ensureBase builds the base template's layer (once per content: the
// layer is named by the hash of what it holds) and returns its record.
func (s *Store) ensureBase() (*Record, error) {
	layer, err := s.baseLayer()
	if err != nil {
		return nil, err
	}
	// Made when its layer first was on this node (the layer stays while
	// its content does).
	var made time.Time
	if st, err := os.Stat(s.layers.Path(layer)); err == nil {
		made = st.ModTime().UTC()
	}
	return &Record{
		ID: BaseName, Names: []string{BaseName, HostName}, Public: true, Tags: map[string]string{DefaultTag: BaseName}, CreatedAt: made,
		Builds: []*Build{{
			ID: BaseName, Status: StatusReady, CreatedAt: made, FinishedAt: made, // the node's default limits
			Image: Image{Layers: []string{layer}, Binds: BaseBinds(), User: "user", Workdir: "/home/user"},
		}},
	}, nil
}

// baseVersion is part of the base layer's fingerprint: bump it when
// writeBaseLayer lays the layer out differently.
const baseVersion = 1

// baseDirs are the base layer's directories.
var baseDirs = []struct {
	path string
	mode os.FileMode
	uid  int
}{
	{"usr", 0o755, 0}, {"proc", 0o555, 0}, {"dev", 0o755, 0}, {"sys", 0o555, 0},
	{"tmp", 0o1777, 0}, {"root", 0o700, 0}, {"home", 0o755, 0}, {"home/user", 0o755, UserUID},
	{"run", 0o755, 0}, {"var", 0o755, 0}, {"var/tmp", 0o1777, 0}, {"var/log", 0o755, 0},
	{"var/lib", 0o755, 0}, {"var/cache", 0o755, 0}, {"opt", 0o755, 0}, {"mnt", 0o755, 0},
	{"srv", 0o755, 0}, {"etc", 0o755, 0}, {"etc/sudoers.d", 0o750, 0}, {"code", 0o777, 0},
}

// baseFiles are the base layer's own files under /etc.
var baseFiles = map[string]string{
	"etc/passwd": "root:x:0:0:root:/root:/bin/bash\n" +
		"user:x:1000:1000:user:/home/user:/bin/bash\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
	"etc/group":          "root:x:0:\ntty:x:5:\nsudo:x:27:user\nusers:x:100:\nuser:x:1000:\nnogroup:x:65534:\n",
	"etc/shadow":         "root:*:19000:0:99999:7:::\nuser::19000:0:99999:7:::\n",
	"etc/hostname":       "sandbox\n",
	"etc/hosts":          "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	"etc/resolv.conf":    "nameserver 127.0.0.1\noptions ndots:0\n",
	"etc/nsswitch.conf":  "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n",
	"etc/sudoers":        "Defaults env_reset\nDefaults secure_path=\"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"\nroot ALL=(ALL:ALL) ALL\n@includedir /etc/sudoers.d\n",
	"etc/sudoers.d/user": "user ALL=(ALL:ALL) NOPASSWD: ALL\n",
	"etc/e2b":            "ENV_ID=base\nTEMPLATE_ID=base\n",
}

// baseLayer returns the base layer: the one built before when nothing it
// is made from changed (its fingerprint, in base.json), else a new one.
// Building it reads and hashes every file it copies (a quarter of a
// second here, most of a server's start before this).
func (s *Store) baseLayer() (string, error) {
	record := filepath.Join(s.dir, "base.json")
	fp, err := baseFingerprint()
	if err != nil {
		return "", err
	}
	var last struct{ Fingerprint, Layer string }
	if b, err := os.ReadFile(record); err == nil && json.Unmarshal(b, &last) == nil &&
		last.Fingerprint == fp && last.Layer != "" {
		if st, err := os.Stat(s.layers.Path(last.Layer)); err == nil && st.IsDir() {
			return last.Layer, nil
		}
	}
	stage, err := s.layers.stage()
	if err != nil {
		return "", err
	}
	if err := writeBaseLayer(stage); err != nil {
		removeStage(stage)
		return "", fmt.Errorf("build base layer: %w", err)
	}
	layer, err := s.layers.commitByContent(stage)
	if err != nil {
		return "", err
	}
	last.Fingerprint, last.Layer = fp, layer
	return layer, fsutil.WriteJSON(record, last)
}

// baseFingerprint describes what the base layer is made of without reading
// any file: the layout above and, for every host entry it copies, its
// name, type, mode, owner, size, inode, change and modification times and
// link target (a changed file changes its ctime, which no tool can set).
func baseFingerprint() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%v\x00%v\x00%v\x00%v\x00", baseVersion, baseDirs, baseFiles, hostEtc, skipEtc)
	for _, d := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		t, _ := os.Readlink("/" + d)
		fmt.Fprintf(h, "%s>%s\x00", d, t)
	}
	for _, name := range hostEtc {
		err := filepath.WalkDir(filepath.Join("/etc", name), func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil {
				return err
			}
			t, _ := os.Readlink(p)
			fmt.Fprintf(h, "%s\x00%o\x00%d:%d\x00%d\x00%d\x00%d.%d\x00%d.%d\x00%s\x00", p, st.Mode, st.Uid, st.Gid, st.Size, st.Ino,
				st.Ctim.Sec, st.Ctim.Nsec, st.Mtim.Sec, st.Mtim.Nsec, t)
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("fingerprint /etc/%s: %w", name, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeBaseLayer lays out the base root under root.
func writeBaseLayer(root string) error {
	for _, d := range baseDirs {
		p := filepath.Join(root, d.path)
		if err := os.Mkdir(p, d.mode); err != nil {
			return err
		}
		if err := os.Chmod(p, d.mode); err != nil { // past the umask
			return err
		}
		if err := os.Lchown(p, d.uid, d.uid); err != nil {
			return err
		}
	}
	// /bin, /sbin, /lib* mirror the host: symlinks where it has merged /usr,
	// empty directories (bind targets) where it has real ones.
	for _, d := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		st, err := os.Lstat("/" + d)
		switch {
		case err != nil:
			continue
		case st.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink("/" + d)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, filepath.Join(root, d)); err != nil {
				return err
			}
		case st.IsDir():
			if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
				return err
			}
		}
	}
	var names []string
	for _, pattern := range hostEtc {
		matches, err := filepath.Glob(filepath.Join("/etc", pattern))
		if err != nil {
			return err
		}
		for _, m := range matches {
			names = append(names, filepath.Base(m))
		}
	}
	for _, name := range names {
		src := filepath.Join("/etc", name)
		skip := func(rel string) bool { return skipEtc[filepath.Join(name, rel)] }
		if err := fsutil.CopyTree(src, filepath.Join(root, "etc", name), fsutil.CopyOptions{Skip: skip}); err != nil {
			return err
		}
	}
	for name, content := range baseFiles {
		mode := os.FileMode(0o644)
		if strings.HasPrefix(name, "etc/sudoers") || name == "etc/shadow" {
			mode = 0o440
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), mode); err != nil {
			return err
		}
	}
	return nil
}

// hashTree hashes names, types, modes, owners, link targets and contents.
func hashTree(root string) (string, error) {
	h := sha256.New()
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(paths)
	for _, p := range paths {
		st, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%s\x00%v\x00%d\x00", rel, st.Mode(), fsutil.Owner(st))
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			t, _ := os.Readlink(p)
			io.WriteString(h, t)
		case st.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return "", err
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return "", err
			}
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// EnsureBase prepares a store under dir and returns its base template (for
// drivers' tests and benchmarks, which need no other).
func EnsureBase(dir string) (Template, error) {
	s, err := NewStore(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		return Template{}, err
	}
	return s.Resolve(context.Background(), "", BaseName)
}

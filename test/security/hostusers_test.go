package security_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"
)

// nobody is the host user the attacks of other host users run as.
const nobody = 65534

// TestOtherHostUsers attacks a server's data directory as another user of
// the host (nobody) would: reading the database, whose secret every
// agent token derives from, and running a setuid-root file a template
// build left in a layer. The data directory sits under world-traversable
// directories, as /var/lib/cove does.
func TestOtherHostUsers(t *testing.T) {
	parent := t.TempDir()
	for _, d := range []string{filepath.Dir(parent), parent} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dataDir := filepath.Join(parent, "data")
	p := newCove(t, dataDir, "--network=false", "--pool-size", "0")
	c := client(t, p.srv)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.BuildTemplate(ctx, cove.TemplateBuild{Name: "suid", Steps: []cove.TemplateStep{
		{Type: "RUN", Args: []string{"cp /usr/bin/id /opt/suid-id && chmod 4755 /opt/suid-id", "root"}},
	}}, nil); err != nil {
		t.Fatal(err)
	}
	sb, err := c.Create(ctx, cove.CreateOptions{Template: "suid"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Kill(ctx)

	// Every path under the data directory: what another user can reach
	// (every directory above it searchable by others) grants them nothing.
	var suid []string
	err = filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a sandbox's mount came and went
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return nil
		}
		if fi.Mode()&fs.ModeSetuid != 0 && fi.Mode().IsRegular() {
			suid = append(suid, path)
		}
		if reachable(dataDir, path) && fi.Mode()&fs.ModeSymlink == 0 && fi.Mode().Perm()&0o007 != 0 {
			t.Errorf("%s (%v) is open to other users of the host", path, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cove.db", "cove.db-wal", "cove.db-shm"} {
		if fi, err := os.Stat(filepath.Join(dataDir, f)); err == nil && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
	if len(suid) == 0 {
		t.Fatal("the build's setuid file is in no layer")
	}

	t.Run("read the database", func(t *testing.T) {
		out, err := asNobody("cat", filepath.Join(dataDir, "cove.db"))
		if err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("nobody read the database: %v %.200q", err, out)
		}
	})
	t.Run("run a layer's setuid-root file", func(t *testing.T) {
		out, err := asNobody(suid[0], "-u")
		if err == nil {
			t.Errorf("nobody ran %s: euid %s", suid[0], strings.TrimSpace(out))
		} else if !errors.Is(err, fs.ErrPermission) {
			t.Logf("refused: %v %s", err, out)
		}
	})
}

// reachable reports whether another user of the host can reach path: every
// directory from dataDir's parent down to path's is searchable by others.
func reachable(dataDir, path string) bool {
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(dataDir) || d == "/" {
			return true
		}
	}
}

// asNobody runs a command as the host's nobody.
func asNobody(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

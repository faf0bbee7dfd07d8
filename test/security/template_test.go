package security_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil/testkit"
	cove "github.com/covesandbox/cove/sdk/go"
)

// TestTemplateSymlinksStayInside builds templates whose /etc files, or
// /etc itself, are symlinks to host paths, and starts sandboxes from them:
// the files a sandbox's start writes (hostname, hosts, resolv.conf) land
// inside the sandbox, never on the host through the template's links.
func TestTemplateSymlinksStayInside(t *testing.T) {
	p := newCove(t, "", "--network=false", "--pool-size", "0")
	c := client(t, p.srv)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hostDir := t.TempDir()
	for i, tc := range []struct {
		name, run string
		refused   bool // the create is refused as the template's fault (400)
	}{
		{"files linked out", fmt.Sprintf("for f in hostname hosts resolv.conf; do rm -f /etc/$f; ln -s %s/$f /etc/$f; done", hostDir), false},
		{"etc linked out", fmt.Sprintf("mv /etc /etc.real && ln -s %s /etc", hostDir), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("symlinks-%d", i)
			_, err := c.BuildTemplate(ctx, cove.TemplateBuild{Name: name, Steps: []cove.TemplateStep{{Type: "RUN", Args: []string{tc.run, "root"}}}}, nil)
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			sb, err := c.Create(ctx, cove.CreateOptions{Template: name})
			switch {
			case err == nil && !tc.refused:
				r := mustRun(t, ctx, sb, "root", "cat /etc/hostname 2>&1; true")
				if strings.TrimSpace(r.out) != sb.ID {
					t.Errorf("/etc/hostname inside: %q, want %s", r.out, sb.ID)
				}
				sb.Kill(ctx)
			case err == nil:
				sb.Kill(ctx)
				t.Errorf("created a sandbox whose /etc leads out of its root")
			case tc.refused && errors.Is(err, cove.ErrInvalidArgument) && strings.Contains(err.Error(), "leads out of its root"):
				t.Logf("create refused: %v", err)
			default:
				t.Errorf("create: %v", err)
			}
			entries, _ := os.ReadDir(hostDir)
			for _, e := range entries {
				b, _ := os.ReadFile(filepath.Join(hostDir, e.Name()))
				t.Errorf("a sandbox's start wrote the host's %s: %q", e.Name(), strings.TrimSpace(string(b)))
			}
			if err := c.DeleteTemplate(ctx, name); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestBuildStaysInside attacks the builder from a template's steps: a RUN
// step makes /etc a symlink to a host directory, and the host work the
// builder does after the step (dropping the sandbox's own /etc files,
// reading /etc/passwd for COPY --chown) must not follow it.
func TestBuildStaysInside(t *testing.T) {
	p := newCove(t, "", "--network=false", "--pool-size", "0")
	c := client(t, p.srv)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("the step's /etc files are dropped inside the layer", func(t *testing.T) {
		hostDir := t.TempDir()
		want := map[string]string{"hostname": "host-name\n", "hosts": "127.0.0.1 host\n", "resolv.conf": "nameserver 127.0.0.53\n"}
		for name, body := range want {
			if err := os.WriteFile(filepath.Join(hostDir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := c.BuildTemplate(ctx, cove.TemplateBuild{Name: "etc-out-run", Steps: []cove.TemplateStep{
			{Type: "RUN", Args: []string{"rm -rf /etc && ln -s " + hostDir + " /etc", "root"}},
		}}, nil)
		t.Logf("build: %v", err)
		for name, body := range want {
			if b, err := os.ReadFile(filepath.Join(hostDir, name)); err != nil || string(b) != body {
				t.Errorf("the build changed the host's %s: %q %v", name, b, err)
			}
		}
		c.DeleteTemplate(ctx, "etc-out-run")
	})

	t.Run("a step's writes are capped", func(t *testing.T) {
		_, err := c.BuildTemplate(ctx, cove.TemplateBuild{Name: "big-step", MemoryMB: 256, Steps: []cove.TemplateStep{
			{Type: "RUN", Args: []string{"dd if=/dev/zero of=/big bs=1M count=1024 2>&1 | tail -1; test $(stat -c %s /big) -ge 1073741824", "root"}},
		}}, func(l cove.BuildLog) { t.Logf("build: %s", l.Message) })
		if err == nil {
			t.Errorf("a step wrote 1 GiB in a build of 256 MiB")
		}
		var total int64
		filepath.WalkDir(p.srv.DataDir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if fi, err := d.Info(); err == nil {
					total += fi.Size()
				}
			}
			return nil
		})
		if total > 256<<20 {
			t.Errorf("the data directory holds %d MiB after the step", total>>20)
		}
		c.DeleteTemplate(ctx, "big-step")
	})

	t.Run("COPY --chown reads no host passwd", func(t *testing.T) {
		hostDir := t.TempDir()
		os.WriteFile(filepath.Join(hostDir, "passwd"), []byte("root:x:0:0::/root:/bin/sh\nevil:x:4242:4242::/:/bin/sh\n"), 0o644)
		os.WriteFile(filepath.Join(hostDir, "group"), []byte("root:x:0:\nevil:x:4242:\n"), 0o644)
		ctxDir := t.TempDir()
		os.WriteFile(filepath.Join(ctxDir, "f"), []byte("payload"), 0o644)
		data, hash, err := cove.ArchiveContext(ctxDir, "f")
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.BuildTemplate(ctx, cove.TemplateBuild{Name: "etc-out-copy", Steps: []cove.TemplateStep{
			{Type: "RUN", Args: []string{"mv /etc /etc.real && ln -s " + hostDir + " /etc", "root"}},
			{Type: "COPY", Args: []string{"f", "/f", "evil", ""}, FilesHash: hash, Files: data},
		}}, nil)
		if err == nil || !strings.Contains(err.Error(), "user evil is not in the template's /etc/passwd") {
			t.Errorf("COPY --chown=evil through a layer's /etc linked to the host: %v, want the user unknown", err)
		}
		c.DeleteTemplate(ctx, "etc-out-copy")
	})
}

// TestWarmFailureShown builds a template whose sandboxes cannot run a
// command as its user (the user is gone from its /etc/passwd): the node's
// warm pool fails to start them, backs off, and the template says why.
func TestWarmFailureShown(t *testing.T) {
	p := newCove(t, "", "--network=false", "--pool-size", "1")
	c := client(t, p.srv)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.BuildTemplate(ctx, cove.TemplateBuild{Name: "nouser", Steps: []cove.TemplateStep{
		{Type: "RUN", Args: []string{"sed -i '/^user:/d' /etc/passwd", "root"}},
	}}, nil); err != nil {
		t.Fatal(err)
	}
	sb, err := c.Create(ctx, cove.CreateOptions{Template: "nouser"}) // asks the pool for the template
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Kill(ctx)
	var why string
	testkit.Eventually(t, time.Minute, func() error {
		list, err := c.ListTemplates(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tpl := range list {
			if slices.Contains(tpl.Names, "nouser") {
				why = tpl.WarmError
			}
		}
		if why == "" {
			return errors.New("the template never said why its warm sandboxes fail")
		}
		return nil
	})
	t.Logf("the template says: %s", why)
	if !strings.Contains(why, "user") {
		t.Errorf("warm error %q does not name the user", why)
	}
}

package security_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	for i, tc := range []struct{ name, run string }{
		{"files linked out", fmt.Sprintf("for f in hostname hosts resolv.conf; do rm -f /etc/$f; ln -s %s/$f /etc/$f; done", hostDir)},
		{"etc linked out", fmt.Sprintf("mv /etc /etc.real && ln -s %s /etc", hostDir)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("symlinks-%d", i)
			_, err := c.BuildTemplate(ctx, cove.TemplateBuild{Name: name, Steps: []cove.TemplateStep{{Type: "RUN", Args: []string{tc.run, "root"}}}}, nil)
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			sb, err := c.Create(ctx, cove.CreateOptions{Template: name})
			if err == nil {
				r := mustRun(t, ctx, sb, "root", "cat /etc/hostname 2>&1; true")
				t.Logf("created; /etc/hostname inside: %q", r.out)
				sb.Kill(ctx)
			} else {
				t.Logf("create refused: %v", err)
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

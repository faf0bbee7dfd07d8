package namespaces

import (
	"context"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/template"
)

func TestSmoke(t *testing.T) {
	dir := t.TempDir()
	d, err := New(Config{Dir: dir + "/sandboxes", CgroupParent: "cove-smoke"}, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := template.EnsureBase(dir + "/templates")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	h, err := d.Create(ctx, "smoke1", isolation.Spec{RootFS: tpl.RootFS, Limits: isolation.Limits{CPUMillis: 1000, MemoryMB: 256, DiskMB: 256, PIDs: 256}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("created %+v in %v", h, time.Since(start))
	c := agentclient.New(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, "smoke1", 49983) })
	res, err := c.Run(ctx, "", "id; hostname; cat /etc/os-release | head -2; ls /; python3 -c 'print(1+1)'; node -e 'console.log(2+2)'; mount | head -30; cat /proc/self/status | grep -i -E 'cap|seccomp|nonewp'", 10*time.Second)
	t.Logf("res %s / %s / %d %s %v", res.Stdout, res.Stderr, res.ExitCode, res.Status, err)
	if err := d.Destroy(ctx, "smoke1"); err != nil {
		t.Fatal(err)
	}
}

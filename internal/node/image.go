package node

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/envd"
	"github.com/covesandbox/cove/internal/envd/envdwire"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/template"
)

// imagesDir holds images while a fork's children start from them; what a
// stopped node left there is removed when it starts again.
func (m *Manager) imagesDir() string { return filepath.Join(m.cfg.Dir, "images") }

// image copies sb's processes (sb.mu held, the sandbox paused) into a new
// image with its manifest.
func (m *Manager) image(ctx context.Context, sb *sandbox) (*template.ProcessImage, error) {
	start := time.Now()
	id := sb.info.ID
	d := sb.driver
	if err := os.MkdirAll(m.imagesDir(), 0o700); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(m.imagesDir(), id+"-")
	if err != nil {
		return nil, err
	}
	img := &template.ProcessImage{Dir: dir, Driver: d.Name(), Token: sb.info.AccessToken}
	cloner, err := driverCan[isolation.Cloner](d, "copy a sandbox's processes")
	if err == nil {
		err = cloner.Image(ctx, id, dir)
	}
	if err == nil {
		img.Files, err = template.SumFiles(dir)
	}
	if err != nil {
		m.removeImage(img)
		return nil, err
	}
	m.log.Info("sandbox processes copied", logx.SandboxID(id), "bytes", img.Bytes(), "took", time.Since(start))
	return img, nil
}

func (m *Manager) removeImage(img *template.ProcessImage) {
	if err := fsutil.RemoveTree(img.Dir); err != nil {
		m.log.Error("remove a copy of a sandbox's processes", "path", img.Dir, logx.Err(err))
	}
}

// clone starts sandbox info.ID from img with spec (launch), its image
// checked against its manifest first.
func (m *Manager) clone(ctx context.Context, d isolation.Driver, info *Info, spec isolation.Spec, img *template.ProcessImage) (isolation.Handle, error) {
	cl, ok := d.(isolation.Cloner)
	if !ok || d.Name() != img.Driver {
		return isolation.Handle{}, errs.New(errs.InvalidArgument, "a copy of a %s sandbox's processes cannot run on the %s driver", img.Driver, d.Name())
	}
	if err := template.VerifyFiles(img.Dir, img.Files); err != nil {
		m.log.Error("copy of a sandbox's processes refused", logx.SandboxID(info.ID), logx.Err(err))
		return isolation.Handle{}, err
	}
	return cl.Clone(ctx, info.ID, spec, img.Dir)
}

// reidentify tells a cloned sandbox's agent, which has its source's token
// and variables, who it is now: its own token and E2B_SANDBOX_ID (the
// processes it carried over keep their environment, as in any copy of a
// running machine).
func reidentify(ctx context.Context, d isolation.Driver, id string, img *template.ProcessImage, spec isolation.Spec) error {
	vars := maps.Clone(spec.Agent.EnvVars)
	if vars == nil {
		vars = map[string]string{}
	}
	maps.Copy(vars, spec.Env)
	token := spec.Agent.AccessToken
	agent := agentclient.New(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, id, envdwire.Port) })
	defer agent.Close()
	agent.SetToken(img.Token)
	if err := agent.Init(ctx, envd.InitRequest{EnvVars: vars, AccessToken: &token}); err != nil {
		return fmt.Errorf("tell a copied agent its sandbox: %w", err)
	}
	return nil
}

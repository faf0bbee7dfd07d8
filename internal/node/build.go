package node

import (
	"bytes"
	"context"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/template"
)

// buildTimeout bounds a build sandbox's life.
const buildTimeout = time.Hour

// StartBuild starts a sandbox for a template build: the same isolation,
// limits and network (with internet access) as any sandbox, over t, whose
// RootFS.Upper keeps what the sandbox writes. The start command is the
// builder's to run. A template whose driver runs no builds (microvm) is
// built on the node's default driver, else on namespaces: the layers are
// the same files.
func (m *Manager) StartBuild(ctx context.Context, t template.Template) (template.BuildSandbox, error) {
	t.StartCmd, t.ReadyCmd = "", ""
	iso := t.Isolation
	if d, err := m.driverNamed(iso); err == nil && !d.Capabilities().Builds {
		iso = "namespaces"
		if m.driver.Capabilities().Builds {
			iso = m.driver.Name()
		}
	}
	info, err := m.Create(ctx, CreateRequest{
		Resolved: &t, Timeout: min(buildTimeout, m.cfg.MaxTimeout), Isolation: iso,
		Metadata: map[string]string{BuildKey: t.ID},
	})
	if err != nil {
		return nil, err
	}
	return &buildSandbox{m: m, id: info.ID}, nil
}

type buildSandbox struct {
	m  *Manager
	id string
}

// Exec runs cmd with /bin/sh -c (as Docker's RUN does) and passes its
// output on line by line.
func (b *buildSandbox) Exec(ctx context.Context, cmd template.Exec, out func(string)) (int, error) {
	agent, err := b.m.Agent(b.id)
	if err != nil {
		return 0, err
	}
	stdout, stderr := &lineSplitter{out: out}, &lineSplitter{out: out}
	var res agentclient.Result
	err = agent.Exec(ctx, agentclient.Command{
		Cmd: "/bin/sh", Args: []string{"-c", cmd.Cmd}, User: cmd.User, Cwd: cmd.Workdir,
		Env: cmd.Env, Background: cmd.Background,
	}, func(o, e []byte) { stdout.write(o); stderr.write(e) }, &res)
	stdout.flush()
	stderr.flush()
	if err != nil {
		return 0, err
	}
	return int(res.ExitCode), nil
}

func (b *buildSandbox) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return b.m.Kill(ctx, b.id)
}

// lineSplitter passes on whole lines of a stream.
type lineSplitter struct {
	buf bytes.Buffer
	out func(string)
}

func (l *lineSplitter) write(p []byte) {
	l.buf.Write(p)
	for {
		i := bytes.IndexByte(l.buf.Bytes(), '\n')
		if i < 0 {
			return
		}
		line := l.buf.Next(i + 1)
		l.out(string(bytes.TrimRight(line, "\r\n")))
	}
}

func (l *lineSplitter) flush() {
	if l.buf.Len() > 0 {
		l.out(l.buf.String())
		l.buf.Reset()
	}
}

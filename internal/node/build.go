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

// lineSplitter passes on the lines of a stream, each cut at
// template.MaxLogLine: it holds at most that much (and one byte to know a
// line was longer), drops the rest of a longer line, and looks at each
// byte of the stream once.
type lineSplitter struct {
	line []byte
	out  func(string)
}

func (l *lineSplitter) write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		part := p
		if i >= 0 {
			part = p[:i]
		}
		if room := template.MaxLogLine + 1 - len(l.line); room > 0 {
			l.line = append(l.line, part[:min(room, len(part))]...)
		}
		if i < 0 {
			return
		}
		l.emit()
		p = p[i+1:]
	}
}

// emit passes on the line so far; a line longer than template.MaxLogLine
// is cut there and ends with template.LineCut.
func (l *lineSplitter) emit() {
	l.out(template.CleanLine(string(bytes.TrimSuffix(l.line, []byte{'\r'}))))
	l.line = l.line[:0]
}

// flush passes on a last line without a newline.
func (l *lineSplitter) flush() {
	if len(l.line) > 0 {
		l.emit()
	}
}

package process

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"

	"github.com/covesandbox/cove/internal/envd/identity"
	"github.com/covesandbox/cove/internal/envd/sudo"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
)

const chunkSize = 32 << 10

// spawn starts the process described by req as user u. The returned proc is
// registered in the table and already has sub subscribed, so the caller
// misses no output.
func (s *Service) spawn(req *pb.StartRequest, u identity.User) (*proc, *subscriber, error) {
	cfg := req.GetProcess()
	if cfg.GetCmd() == "" {
		return nil, nil, errs.New(errs.InvalidArgument, "process cmd is empty")
	}
	cwd, err := s.workdir(cfg, u)
	if err != nil {
		return nil, nil, err
	}
	env := s.environ(cfg, u)
	argv0, err := lookPath(cfg.GetCmd(), envValue(env, "PATH"), cwd)
	if err != nil {
		return nil, nil, err
	}

	p := newProc(cfg, req.Tag)
	sub, _ := p.subscribe()
	files, outputs, err := p.openStdio(req)
	if err != nil {
		return nil, nil, err
	}
	attr := &syscall.ProcAttr{Dir: cwd, Env: env, Files: fds(files), Sys: &syscall.SysProcAttr{}}
	if p.pty != nil {
		attr.Sys.Setsid, attr.Sys.Setctty, attr.Sys.Ctty = true, true, 0
	} else {
		attr.Sys.Setpgid = true
	}
	if u.UID != uint32(os.Geteuid()) || u.GID != uint32(os.Getegid()) {
		attr.Sys.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
	}
	oomBefore := s.oomCount()
	fork := func() (int, error) {
		return syscall.ForkExec(argv0, append([]string{cfg.GetCmd()}, cfg.GetArgs()...), attr)
	}
	if s.opts.Spawn != nil {
		direct := fork
		fork = func() (int, error) { return s.opts.Spawn(direct) }
	}
	pid, wait, err := s.reaper.start(fork)
	for _, f := range files[:3] {
		if f != nil && f != os.Stdin {
			f.Close() // the child's ends
		}
	}
	if err != nil {
		p.closeParentEnds(outputs)
		return nil, nil, errs.New(errs.InvalidArgument, "start %s: %v", cfg.GetCmd(), err)
	}
	if s.opts.Init {
		preferForOOM(pid)
	}
	p.pid = uint32(pid)
	s.add(p)
	s.log.Info("process started", logx.PID(pid), "cmd", commandLine(cfg))
	go s.supervise(p, wait, outputs, oomBefore)
	return p, sub, nil
}

// maxLoggedCmd bounds the command line a log line carries.
const maxLoggedCmd = 200

// commandLine is a process's command and arguments as a shell would read
// them (an argument with spaces or quotes in single quotes), cut to
// maxLoggedCmd bytes: what the sandbox's log says of it. A shell's script
// (the last argument, after -c: how the SDKs run every command) is written
// as it is, which reads as the command the user gave.
func commandLine(cfg *pb.ProcessConfig) string {
	var b strings.Builder
	b.WriteString(cfg.GetCmd())
	args := cfg.GetArgs()
	for i, a := range args {
		b.WriteByte(' ')
		script := i == len(args)-1 && i > 0 && args[i-1] == "-c" && a != ""
		if !script && (a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?")) {
			b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
		} else {
			b.WriteString(a)
		}
		if b.Len() > maxLoggedCmd {
			break
		}
	}
	line := b.String()
	if len(line) > maxLoggedCmd {
		line = strings.ToValidUTF8(line[:maxLoggedCmd], "") + "…"
	}
	return line
}

// userOOMScoreAdj is what the sandbox's processes get: when the sandbox
// runs out of memory the kernel kills one of them, not the agent (which is
// what a sandbox lives by). Memory in the sandbox's tmpfs counts toward no
// process, so by size alone the agent could look the largest. A process
// may lower its own value back to the agent's 0, not below.
const userOOMScoreAdj = "500"

// preferForOOM marks a process the agent started as the OOM killer's first
// choice. Anything it forks before this lands keeps the agent's value; a
// process cannot grow much in that time.
func preferForOOM(pid int) {
	_ = os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte(userOOMScoreAdj), 0)
}

// output is one stream read from the process.
type output struct {
	f    *os.File
	wrap func([]byte) *pb.ProcessEvent_DataEvent
}

// openStdio creates the process's stdin, stdout and stderr: a PTY, or pipes
// (stdin a pipe unless the request turns it off).
func (p *proc) openStdio(req *pb.StartRequest) (files []*os.File, outs []output, err error) {
	if req.Pty != nil {
		master, tty, err := pty.Open()
		if err != nil {
			return nil, nil, errs.New(errs.Internal, "open pty: %v", err)
		}
		size := req.GetPty().GetSize()
		if size.GetCols() > 0 && size.GetRows() > 0 {
			_ = pty.Setsize(master, &pty.Winsize{Cols: uint16(size.GetCols()), Rows: uint16(size.GetRows())})
		}
		p.pty = master
		return []*os.File{tty, tty, tty}, []output{{master, func(b []byte) *pb.ProcessEvent_DataEvent {
			return &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Pty{Pty: b}}
		}}}, nil
	}
	var stdin *os.File
	if req.Stdin == nil || req.GetStdin() {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, errs.New(errs.Internal, "stdin pipe: %v", err)
		}
		stdin, p.stdin = r, w
	} else {
		if stdin, err = os.Open(os.DevNull); err != nil {
			return nil, nil, errs.New(errs.Internal, "open %s: %v", os.DevNull, err)
		}
	}
	or, ow, err := os.Pipe()
	if err != nil {
		stdin.Close()
		return nil, nil, errs.New(errs.Internal, "stdout pipe: %v", err)
	}
	er, ew, err := os.Pipe()
	if err != nil {
		stdin.Close()
		or.Close()
		ow.Close()
		return nil, nil, errs.New(errs.Internal, "stderr pipe: %v", err)
	}
	return []*os.File{stdin, ow, ew}, []output{
		{or, func(b []byte) *pb.ProcessEvent_DataEvent {
			return &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Stdout{Stdout: b}}
		}},
		{er, func(b []byte) *pb.ProcessEvent_DataEvent {
			return &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Stderr{Stderr: b}}
		}},
	}, nil
}

func (p *proc) closeParentEnds(outs []output) {
	for _, o := range outs {
		o.f.Close()
	}
	if p.stdin != nil {
		p.stdin.Close()
	}
}

// supervise pumps output to subscribers until the process ends, then
// publishes its end event.
func (s *Service) supervise(p *proc, wait <-chan unix.WaitStatus, outs []output, oomBefore uint64) {
	drained := make(chan struct{})
	go func() {
		done := make(chan struct{}, len(outs))
		for _, o := range outs {
			go func() {
				p.pump(o, s.output)
				done <- struct{}{}
			}()
		}
		for range outs {
			<-done
		}
		close(drained)
	}()
	ws := <-wait
	close(p.reaped)
	// A background child may keep the output open after the process ended:
	// give readers a moment, then cut them off (they drain what is buffered).
	select {
	case <-drained:
	case <-time.After(250 * time.Millisecond):
		for _, o := range outs {
			if o.f.SetReadDeadline(time.Now()) != nil {
				o.f.Close()
			}
		}
		<-drained
	}
	oom := s.killedForMemory(ws, oomBefore)
	p.closeParentEnds(outs)
	end := endEvent(ws, oom)
	level := slog.LevelInfo
	if oom {
		level = slog.LevelWarn
	}
	// Logged before the end is told: what waited for it finds it logged.
	s.log.Log(context.Background(), level, "process ended", logx.PID(int(p.pid)), "cmd", commandLine(p.config), "status", end.Status, "oom", oom)
	p.finish(end)
	s.forgetLater(p)
}

// killedForMemory reports whether a process that ended with ws was the OOM
// killer's: killed, and the sandbox's OOM kill count above before. The
// kernel counts a kill after sending it, so a SIGKILL not yet counted is
// read again for a moment (under gVisor the process's end reaches the
// agent that fast).
func (s *Service) killedForMemory(ws unix.WaitStatus, before uint64) bool {
	if !ws.Signaled() || ws.Signal() != unix.SIGKILL || s.opts.OOMKills == nil {
		return false
	}
	for range 10 {
		if s.oomCount() > before {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// pump publishes what the process writes to o, at most at limit's rate.
func (p *proc) pump(o output, limit *rate.Limiter) {
	buf := make([]byte, chunkSize)
	emit := func(b []byte) {
		if limit != nil {
			_ = limit.WaitN(context.Background(), len(b)) // len(b) ≤ chunkSize < outputBurst
		}
		p.publish(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: o.wrap(append([]byte(nil), b...))}})
	}
	for {
		n, err := o.f.Read(buf)
		if n > 0 {
			emit(buf[:n])
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Cut off because a background child keeps the stream open:
			// still deliver what the process wrote before it ended.
			drain(o.f, buf, emit)
			return
		}
		if err != nil {
			// io.EOF for pipes, EIO for a PTY whose last writer is gone.
			return
		}
	}
}

// drain reads what is buffered in f without waiting for more.
func drain(f *os.File, buf []byte, emit func([]byte)) {
	// A passed deadline would fail the raw read before it is tried.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		return
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		for {
			n, err := unix.Read(int(fd), buf)
			if n <= 0 || err != nil {
				return true // EAGAIN (nothing more now), EOF or an error: done
			}
			emit(buf[:n])
		}
	})
}

// killAfter kills the process group when ctx's deadline passes before the
// process ends: Connect-Timeout-Ms bounds the process's life.
func (s *Service) killAfter(ctx context.Context, p *proc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return
	}
	t := time.AfterFunc(time.Until(dl), func() { _ = unix.Kill(-int(p.pid), unix.SIGKILL) })
	go func() {
		<-p.exited
		t.Stop()
	}()
}

func (s *Service) workdir(cfg *pb.ProcessConfig, u identity.User) (string, error) {
	dir := s.settings.DefaultWorkdir()
	if cfg.Cwd != nil && cfg.GetCwd() != "" {
		dir = cfg.GetCwd()
	}
	if dir == "" {
		dir = u.Home
	}
	p, err := identity.ExpandPath(u, dir, u.Home)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(p); err != nil || !st.IsDir() {
		return "", errs.New(errs.InvalidArgument, "cwd '%s' does not exist", p)
	}
	return p, nil
}

// environ builds the process environment: the user's identity, then the
// sandbox's global variables, then the request's own (last one wins).
func (s *Service) environ(cfg *pb.ProcessConfig, u identity.User) []string {
	vars := map[string]string{
		"PATH":    s.opts.DefaultPath,
		"HOME":    u.Home,
		"USER":    u.Name,
		"LOGNAME": u.Name,
	}
	if p := agentPath(); p != "" {
		vars["PATH"] = p
	}
	for k, v := range s.settings.EnvVars() {
		vars[k] = v
	}
	for k, v := range cfg.GetEnvs() {
		vars[k] = v
	}
	// In a sandbox, its own commands (sudo) stay first on any PATH a
	// template or request sets.
	if s.opts.Init && !slices.Contains(filepath.SplitList(vars["PATH"]), sudo.BinDir) {
		vars["PATH"] = sudo.BinDir + ":" + vars["PATH"]
	}
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

// lookPath finds cmd the way a shell would, in the process's own PATH.
func lookPath(cmd, path, cwd string) (string, error) {
	if strings.Contains(cmd, "/") {
		p := cmd
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		if isExecutable(p) {
			return p, nil
		}
		return "", errs.New(errs.InvalidArgument, "command %q not found or not executable", cmd)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if p := filepath.Join(dir, cmd); isExecutable(p) {
			return p, nil
		}
	}
	return "", errs.New(errs.InvalidArgument, "command %q not found in PATH", cmd)
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func fds(files []*os.File) []uintptr {
	out := make([]uintptr, len(files))
	for i, f := range files {
		out[i] = f.Fd()
	}
	return out
}

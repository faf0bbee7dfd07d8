package process

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/envd/identity"
	"github.com/covesandbox/cove/internal/envd/sudo"
	"github.com/covesandbox/cove/internal/logx"
)

// sudoGroups are the groups whose members may use sudo, besides root and
// E2B's `user` (passwordless, as E2B's sandboxes have it).
var sudoGroups = []string{"sudo", "wheel", "admin"}

// ServeSudo answers the sandbox's sudo clients on ln until ctx ends: each
// connection is one command, run as the user asked for (root by default)
// when the caller may use sudo.
func (s *Service) ServeSudo(ctx context.Context, ln *net.UnixListener) {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		conn, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("sudo socket", logx.Err(err))
			}
			return
		}
		go func() {
			defer conn.Close()
			if err := s.sudo(conn); err != nil {
				b, _ := json.Marshal(sudo.Message{Error: err.Error()})
				_, _ = conn.Write(b)
			}
		}()
	}
}

// ListenSudo opens the agent's sudo socket. Its connections take the
// credentials clients send (SO_PASSCRED, inherited by accepted sockets).
func ListenSudo() (*net.UnixListener, error) {
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sudo.SocketName, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	raw, err := ln.SyscallConn()
	if err == nil {
		var serr error
		err = raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1) })
		err = cmp.Or(err, serr)
	}
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("pass credentials: %w", err)
	}
	return ln, nil
}

// sudo serves one sudo client: an error before the command starts is
// reported to it.
func (s *Service) sudo(conn *net.UnixConn) error {
	req, sent, stdio, err := readSudoRequest(conn)
	defer func() {
		for _, f := range stdio {
			f.Close()
		}
	}()
	if err != nil {
		return err
	}
	caller, err := peer(conn, sent)
	if err != nil {
		return err
	}
	if !maySudo(caller) {
		return fmt.Errorf("%s may not use sudo in this sandbox (root, user and the members of %s may)", caller.Name, strings.Join(sudoGroups, ", "))
	}
	target, err := identity.Lookup(cmp.Or(req.User, "root"))
	if err != nil {
		return fmt.Errorf("unknown user %s", req.User)
	}
	env := s.sudoEnv(req, caller, target)
	prog, argv, cwd := sudoArgv(req, target, envValue(env, "SHELL"))
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		cwd = target.Home
	}
	path, err := lookPath(prog, envValue(env, "PATH"), cwd)
	if err != nil {
		return fmt.Errorf("%s: command not found", prog)
	}
	attr := &syscall.ProcAttr{Dir: cwd, Env: env, Sys: &syscall.SysProcAttr{}}
	var master *os.File
	if req.PTY != nil {
		m, tty, err := pty.Open()
		if err != nil {
			return fmt.Errorf("open a terminal: %v", err)
		}
		master = m
		defer tty.Close()
		_ = pty.Setsize(m, &pty.Winsize{Cols: req.PTY.Cols, Rows: req.PTY.Rows})
		attr.Files = []uintptr{tty.Fd(), tty.Fd(), tty.Fd()}
		attr.Sys.Setsid, attr.Sys.Setctty, attr.Sys.Ctty = true, true, 0
	} else {
		if len(stdio) != 3 {
			return errors.New("the request lacks its stdin, stdout and stderr")
		}
		attr.Files = fds(stdio)
		attr.Sys.Setpgid = true
	}
	if target.UID != uint32(os.Geteuid()) || target.GID != uint32(os.Getegid()) {
		attr.Sys.Credential = &syscall.Credential{Uid: target.UID, Gid: target.GID, Groups: target.Groups}
	}
	fork := func() (int, error) { return syscall.ForkExec(path, argv, attr) }
	if s.opts.Spawn != nil {
		direct := fork
		fork = func() (int, error) { return s.opts.Spawn(direct) }
	}
	pid, wait, err := s.reaper.start(fork)
	if err != nil {
		if master != nil {
			master.Close()
		}
		return fmt.Errorf("%s: %v", argv[0], err)
	}
	if s.opts.Init {
		preferForOOM(pid)
	}
	for _, f := range stdio {
		f.Close()
	}
	stdio = nil
	s.log.Debug("sudo", "caller", caller.Name, "user", target.Name, logx.PID(pid), "cmd", argv[0])
	started, _ := json.Marshal(sudo.Message{Started: pid})
	var rights []byte
	if master != nil {
		rights = unix.UnixRights(int(master.Fd()))
	}
	if _, _, err := conn.WriteMsgUnix(started, rights, nil); err != nil {
		s.log.Debug("sudo: tell the client the command started", logx.Err(err)) // it went away: relaySignals hangs the command up
	}
	if master != nil {
		master.Close() // the client holds it now
	}
	gone := make(chan struct{})
	go relaySignals(conn, pid, gone)
	ws := <-wait
	close(gone)
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	b, _ := json.Marshal(sudo.Message{Exit: &code})
	_, _ = conn.Write(b)
	return nil
}

// relaySignals passes the client's signals to the command's process group;
// a client that goes away hangs the command up (killed 2 s later).
func relaySignals(conn *net.UnixConn, pid int, gone <-chan struct{}) {
	buf := make([]byte, 512)
	for {
		n, err := conn.Read(buf)
		if err != nil || n == 0 {
			select {
			case <-gone:
				return
			default:
			}
			_ = syscall.Kill(-pid, syscall.SIGHUP)
			select {
			case <-gone:
			case <-time.After(2 * time.Second):
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
			return
		}
		var m sudo.Message
		if json.Unmarshal(buf[:n], &m) == nil && m.Signal > 0 && m.Signal < 65 {
			_ = syscall.Kill(-pid, syscall.Signal(m.Signal))
		}
	}
}

// peer is the user at the other end of conn: the credentials it sent,
// which the kernel checked, and which must agree with the socket's peer
// credentials (gVisor reports none of a peer's: uid 0 there is not
// trusted alone).
func peer(conn *net.UnixConn, sent *unix.Ucred) (identity.User, error) {
	if sent == nil {
		return identity.User{}, errors.New("the request carries no credentials")
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		return identity.User{}, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return identity.User{}, err
	}
	if cerr != nil {
		return identity.User{}, fmt.Errorf("who is asking: %v", cerr)
	}
	if cred.Uid != 0 && cred.Uid != sent.Uid {
		return identity.User{}, fmt.Errorf("the credentials sent (uid %d) are not the caller's (uid %d)", sent.Uid, cred.Uid)
	}
	uid := strconv.FormatUint(uint64(sent.Uid), 10)
	u, err := identity.Lookup(uid)
	if err != nil || u.UID != sent.Uid {
		return identity.User{Name: uid, UID: sent.Uid, GID: sent.Gid}, nil
	}
	return u, nil
}

// maySudo: root, E2B's user and the members of the sudo groups.
func maySudo(u identity.User) bool {
	if u.UID == 0 || u.Name == "user" {
		return true
	}
	for _, name := range sudoGroups {
		if g, err := user.LookupGroup(name); err == nil {
			if gid, err := strconv.ParseUint(g.Gid, 10, 32); err == nil && (u.GID == uint32(gid) || slices.Contains(u.Groups, uint32(gid))) {
				return true
			}
		}
	}
	return false
}

// readSudoRequest reads the request, the credentials and the descriptors
// it carries.
func readSudoRequest(conn *net.UnixConn) (req sudo.Request, cred *unix.Ucred, files []*os.File, err error) {
	buf := make([]byte, 1<<20)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred)+unix.CmsgSpace(3*4))
	n, oobn, flags, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return req, nil, nil, fmt.Errorf("read the request: %v", err)
	}
	cmsgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
	for i := range cmsgs {
		if fds, err := unix.ParseUnixRights(&cmsgs[i]); err == nil {
			for _, fd := range fds {
				files = append(files, os.NewFile(uintptr(fd), "stdio"))
			}
		} else if c, err := unix.ParseUnixCredentials(&cmsgs[i]); err == nil {
			cred = c
		}
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		return req, cred, files, errors.New("the request is too large")
	}
	if err := json.Unmarshal(buf[:n], &req); err != nil {
		return req, cred, files, fmt.Errorf("a malformed request: %v", err)
	}
	if len(req.Argv) == 0 && !req.Login && !req.Shell {
		return req, cred, files, errors.New("a command is required")
	}
	return req, cred, files, nil
}

// sudoEnv is the command's environment, reset as Debian's sudo does it
// (env_reset, secure_path): the terminal and locale variables kept, the
// target's identity, SUDO_*; with -E the caller's whole environment; the
// sandbox's variables, and VAR=value given before the command, on top.
func (s *Service) sudoEnv(req sudo.Request, caller, target identity.User) []string {
	vars := map[string]string{}
	for _, kv := range req.Env {
		k, v, _ := strings.Cut(kv, "=")
		if req.KeepEnv || k == "TERM" || k == "COLORTERM" || k == "LANG" || k == "LANGUAGE" || strings.HasPrefix(k, "LC_") || k == "DISPLAY" {
			vars[k] = v
		}
	}
	for k, v := range s.settings.EnvVars() {
		if _, ok := vars[k]; !ok {
			vars[k] = v
		}
	}
	vars["PATH"] = s.opts.DefaultPath
	if p := agentPath(); p != "" {
		vars["PATH"] = p
	}
	vars["HOME"], vars["USER"], vars["LOGNAME"] = target.Home, target.Name, target.Name
	vars["SHELL"] = loginShell(target.Name)
	vars["SUDO_USER"], vars["SUDO_UID"], vars["SUDO_GID"] = caller.Name, strconv.FormatUint(uint64(caller.UID), 10), strconv.FormatUint(uint64(caller.GID), 10)
	vars["SUDO_COMMAND"] = strings.Join(req.Argv, " ")
	for k, v := range req.Set {
		vars[k] = v
	}
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

// sudoArgv is what runs: the command, or with -i the target's login shell
// (in its home), with -s a shell, either running the command if one is
// given.
func sudoArgv(req sudo.Request, target identity.User, shell string) (prog string, argv []string, cwd string) {
	cwd = req.Cwd
	if !req.Login && !req.Shell {
		return req.Argv[0], req.Argv, cwd
	}
	if req.Login {
		cwd = target.Home
	}
	name := filepath.Base(shell)
	if req.Login {
		name = "-" + name
	}
	argv = []string{shell}
	if req.Login && len(req.Argv) == 0 {
		argv[0] = name // a login shell: argv[0] starts with '-'
	}
	if len(req.Argv) > 0 {
		argv = append(argv, "-c", strings.Join(req.Argv, " "))
	}
	return shell, argv, cwd
}

// loginShell is u's shell from /etc/passwd, /bin/sh without one.
func loginShell(name string) string {
	data, err := os.ReadFile("/etc/passwd")
	if err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Split(line, ":")
			if len(f) == 7 && f[0] == name && f[6] != "" {
				return f[6]
			}
		}
	}
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash"
	}
	return "/bin/sh"
}

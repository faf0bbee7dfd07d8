package namespaces

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/isolation/namespaces/nsinit"
	"github.com/covesandbox/cove/internal/logx"
)

// spawner is the node's end of the spawner process (spawner_linux.go),
// started at the first spawn and again after it died.
type spawner struct {
	binary string // run as nsinit.SpawnerArg0
	log    *slog.Logger

	mu   sync.Mutex // one request at a time
	cmd  *exec.Cmd
	sock *os.File
}

// start runs the spawner process; s.mu is held.
func (s *spawner) start() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("spawner socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "spawner"), os.NewFile(uintptr(fds[1]), "spawner")
	defer theirs.Close()
	cmd := &exec.Cmd{
		Path:       s.binary,
		Args:       []string{nsinit.SpawnerArg0},
		Env:        []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
		ExtraFiles: []*os.File{theirs}, // nsinit.FDSpawner
		Stderr:     os.Stderr,
	}
	if err := cmd.Start(); err != nil {
		ours.Close()
		return fmt.Errorf("start the spawner: %w", err)
	}
	s.cmd, s.sock = cmd, ours
	return nil
}

// stop ends the spawner (it exits when its socket closes); s.mu is held.
func (s *spawner) stop() {
	if s.cmd == nil {
		return
	}
	s.sock.Close()
	_ = s.cmd.Wait()
	s.cmd, s.sock = nil, nil
}

// Close ends the spawner; the children it started are not touched.
func (s *spawner) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop()
}

// spawn has the spawner start req's child with files as its descriptors 0
// and up (netns, when not nil, the network namespace it is born in). The
// child is this process's: the returned initProc reaps it.
func (s *spawner) spawn(req nsinit.SpawnRequest, netns *os.File, files []*os.File) (*initProc, error) {
	var fds []int
	if netns != nil {
		req.NetNS = true
		fds = append(fds, int(netns.Fd()))
	}
	for _, f := range files {
		fds = append(fds, int(f.Fd()))
	}
	if len(fds) > nsinit.MaxSpawnFDs {
		return nil, fmt.Errorf("spawn: %d descriptors, at most %d", len(fds), nsinit.MaxSpawnFDs)
	}
	msg, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var reply nsinit.SpawnReply
	var pidfd int
	for attempt := 0; ; attempt++ {
		if s.cmd == nil {
			if err := s.start(); err != nil {
				return nil, err
			}
		}
		var sent bool
		reply, pidfd, sent, err = s.roundTrip(msg, fds)
		if err == nil {
			break
		}
		s.log.Warn("the spawner failed; starting another", logx.Err(err))
		s.stop()
		if sent || attempt > 0 { // the request may have been served: never twice
			return nil, fmt.Errorf("spawn: %w", err)
		}
	}
	if reply.Err != "" {
		return nil, errors.New(reply.Err)
	}
	if pidfd < 0 {
		return nil, fmt.Errorf("spawn: no pidfd came with process %d", reply.PID)
	}
	return newInitProc(reply.PID, pidfd)
}

// roundTrip sends one request and reads its reply; sent says whether the
// request reached the spawner.
func (s *spawner) roundTrip(msg []byte, fds []int) (reply nsinit.SpawnReply, pidfd int, sent bool, err error) {
	pidfd = -1
	raw, err := s.sock.SyscallConn()
	if err != nil {
		return reply, pidfd, false, err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		var rights []byte
		if len(fds) > 0 {
			rights = unix.UnixRights(fds...)
		}
		serr = unix.Sendmsg(int(fd), msg, rights, nil, 0)
	}); err != nil {
		return reply, pidfd, false, err
	}
	if serr != nil {
		return reply, pidfd, false, serr
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	var rerr error
	if err := raw.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	}); err != nil {
		return reply, pidfd, true, err
	}
	if errors.Is(rerr, unix.ECONNRESET) {
		// The spawner ended with the request unread in its queue: it
		// served nothing.
		return reply, pidfd, false, rerr
	}
	if rerr != nil {
		return reply, pidfd, true, rerr
	}
	if n == 0 {
		return reply, pidfd, true, errors.New("the spawner exited")
	}
	got, err := nsinit.ReceivedFDs(oob[:oobn])
	if err == nil && len(got) > 1 {
		err = fmt.Errorf("%d descriptors in a spawn reply", len(got))
	}
	if err != nil {
		for _, fd := range got {
			unix.Close(fd)
		}
		return reply, pidfd, true, err
	}
	if len(got) == 1 {
		pidfd = got[0]
	}
	if err := json.Unmarshal(buf[:n], &reply); err != nil {
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
		return reply, -1, true, fmt.Errorf("spawn reply: %w", err)
	}
	return reply, pidfd, true, nil
}

// initProc is a sandbox's init, a child of this process, held by a pidfd.
type initProc struct {
	pid   int
	pidfd *os.File // non-blocking: waits go through the poller, not a thread each
}

func newInitProc(pid, pidfd int) (*initProc, error) {
	if err := unix.SetNonblock(pidfd, true); err != nil {
		unix.Close(pidfd)
		return nil, err
	}
	return &initProc{pid: pid, pidfd: os.NewFile(uintptr(pidfd), "pidfd")}, nil
}

// kill SIGKILLs the init, if it still runs.
func (p *initProc) kill() error {
	raw, err := p.pidfd.SyscallConn()
	if err != nil {
		return err
	}
	var kerr error
	if err := raw.Control(func(fd uintptr) { kerr = unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0) }); err != nil {
		return err
	}
	if errors.Is(kerr, unix.ESRCH) {
		return nil
	}
	return kerr
}

// wait reaps the init once it exits, and says how it ended.
func (p *initProc) wait() string {
	defer p.pidfd.Close()
	raw, err := p.pidfd.SyscallConn()
	if err != nil {
		return err.Error()
	}
	var info siginfoChild
	var werr error
	err = raw.Read(func(fd uintptr) bool {
		e := unix.EINTR
		for e == unix.EINTR {
			info = siginfoChild{}
			_, _, e = unix.Syscall6(unix.SYS_WAITID, unix.P_PIDFD, fd, uintptr(unsafe.Pointer(&info)), unix.WEXITED|unix.WNOHANG, 0, 0)
		}
		switch {
		case e == unix.EAGAIN || (e == 0 && info.pid == 0):
			return false // not yet: wait until the pidfd reads
		case e != 0:
			werr = e
		}
		return true
	})
	switch {
	case err != nil:
		return err.Error()
	case werr != nil:
		return "wait: " + werr.Error()
	}
	switch info.code {
	case cldExited:
		if info.status == 0 {
			return "agent exited"
		}
		return fmt.Sprintf("exit status %d", info.status)
	case cldKilled, cldDumped:
		return "signal: " + syscall.Signal(info.status).String()
	}
	return fmt.Sprintf("ended (code %d, status %d)", info.code, info.status)
}

// siginfoChild is the head of a siginfo_t for SIGCHLD, as waitid fills it.
type siginfoChild struct {
	signo, errno, code int32
	_                  int32
	pid                int32
	uid                uint32
	status             int32
	_                  [100]byte
}

// The si_code values of a child that ended.
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

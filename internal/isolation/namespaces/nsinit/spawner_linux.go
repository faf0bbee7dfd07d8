package nsinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// The spawner is a small, long-lived child of the node (this binary under
// SpawnerArg0) that clones the sandboxes' inits, so that the node never
// forks itself. Go cannot vfork a child that gets a new user namespace (it
// waits for its id maps), so a fork copies the forking process's page
// tables and makes its pages copy-on-write until the child execs: for the
// node, with its heap and a hundred threads, that was most of a create's
// CPU. The spawner's are a few megabytes.
//
// It serves one request at a time on a SOCK_SEQPACKET socket (FDSpawner):
// a SpawnRequest in JSON with descriptors (the network namespace to be
// born in, if any, then the child's descriptors from 0 up), answered with
// a SpawnReply and the child's pidfd. The child is cloned with
// CLONE_PARENT: it is the node's child, which reaps it, and outlives the
// spawner as it would the node. The spawner exits when the node closes the
// socket (or dies).
const (
	SpawnerArg0 = "cove-spawner"
	FDSpawner   = 3
	// MaxSpawnFDs bounds the descriptors one request carries.
	MaxSpawnFDs = 16
)

// SpawnRequest is what the node asks the spawner to start.
type SpawnRequest struct {
	Path       string   `json:"path"`
	Args       []string `json:"args"`
	Env        []string `json:"env"`
	Cloneflags uintptr  `json:"cloneflags"`
	// Owner, when not 0, gives the child a user namespace owned by this
	// host uid, which maps the namespace's ids 0..userNSSize-1 from it.
	Owner uint32 `json:"owner,omitempty"`
	// NetNS says the first descriptor is the network namespace the child
	// is born in.
	NetNS bool `json:"netns,omitempty"`
}

// SpawnReply answers a SpawnRequest; a pidfd comes with it on success.
type SpawnReply struct {
	PID int    `json:"pid,omitempty"`
	Err string `json:"err,omitempty"`
}

// spawnerMain serves the node's requests until it closes the socket.
func spawnerMain() int {
	unix.CloseOnExec(FDSpawner) // no child inherits it
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4*MaxSpawnFDs))
	for {
		n, oobn, _, _, err := unix.Recvmsg(FDSpawner, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return 0 // the node is gone, or done with us
		}
		fds, ferr := ReceivedFDs(oob[:oobn])
		var reply SpawnReply
		pidfd := -1
		var req SpawnRequest
		switch {
		case ferr != nil:
			reply.Err = ferr.Error()
		case json.Unmarshal(buf[:n], &req) != nil:
			reply.Err = "malformed spawn request"
		default:
			reply.PID, pidfd, err = spawnOne(req, fds)
			if err != nil {
				reply.Err = err.Error()
			}
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
		msg, _ := json.Marshal(reply)
		var rights []byte
		if pidfd >= 0 {
			rights = unix.UnixRights(pidfd)
		}
		err = unix.Sendmsg(FDSpawner, msg, rights, nil, 0)
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
		if err != nil {
			return 1
		}
	}
}

// spawnOne clones and execs req's child from a thread of its own, which
// enters the network namespace and takes the owner's uid first. That
// thread is never used again: it dies with its goroutine.
func spawnOne(req SpawnRequest, fds []int) (pid, pidfd int, err error) {
	type result struct {
		pid, pidfd int
		err        error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked
		pid, pidfd, err := spawnHere(req, fds)
		done <- result{pid, pidfd, err}
	}()
	r := <-done
	return r.pid, r.pidfd, r.err
}

// spawnHere clones and execs req's child from the calling (locked) thread.
//
// A sandbox's user namespace belongs to req.Owner, the first host id of its
// range: the thread takes it as its effective uid before it clones. The
// kernel charges per-user counts (inotify instances, epoll watches,
// processes …) up the chain of namespace owners: owned by host root, every
// sandbox would still share host root's counts, and could exhaust them.
// Leaving uid 0 empties the thread's effective capabilities; it raises them
// again from its permitted set (its real and saved uids stay 0), so it can
// still write the child's id maps.
func spawnHere(req SpawnRequest, fds []int) (int, int, error) {
	if req.NetNS {
		if len(fds) == 0 {
			return 0, -1, errors.New("no network namespace came with the request")
		}
		if err := unix.Setns(fds[0], unix.CLONE_NEWNET); err != nil {
			return 0, -1, fmt.Errorf("enter the sandbox network: %w", err)
		}
		fds = fds[1:]
	}
	attr := &syscall.SysProcAttr{Cloneflags: req.Cloneflags | unix.CLONE_PARENT, Setsid: true}
	pidfd := -1
	attr.PidFD = &pidfd
	if req.Owner != 0 {
		if err := setEUID(req.Owner); err != nil {
			return 0, -1, err
		}
		if err := raiseEffective(); err != nil {
			return 0, -1, err
		}
		ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(req.Owner), Size: UserNSSize}}
		attr.Cloneflags |= unix.CLONE_NEWUSER
		attr.UidMappings, attr.GidMappings = ids, ids
		attr.GidMappingsEnableSetgroups = true
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0}
	}
	files := make([]uintptr, len(fds))
	for i, fd := range fds {
		files[i] = uintptr(fd)
	}
	pid, err := syscall.ForkExec(req.Path, req.Args, &syscall.ProcAttr{Env: req.Env, Files: files, Sys: attr})
	if err != nil {
		return 0, -1, fmt.Errorf("start %s: %w", req.Path, err)
	}
	return pid, pidfd, nil
}

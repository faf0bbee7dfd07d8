package microvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
	"github.com/covesandbox/cove/internal/isolation/microvm/guest"
)

// Link-local addresses of a guest's private network: the host's end of
// the tap and the guest's eth0 (each VM has a network namespace of its
// own, so every VM uses the same pair).
const (
	tapName   = "tap0"
	hostAddr  = "169.254.100.1"
	guestAddr = "169.254.100.2"
)

// VMSpec is a guest to boot.
type VMSpec struct {
	// Dir is the VM's own directory (its config, sockets and the mount
	// points of its shares); the caller makes it and removes it after
	// Stop.
	Dir       string
	QEMU      string // qemu-system-x86_64
	Virtiofsd string // QEMU's virtiofsd (for Shares)
	Machine   Machine
	// Shares are host directories the guest sees read-only at their
	// targets: each is bound read-only under Dir and served by a virtiofsd
	// of its own.
	Shares []HostShare
	// Layers, when set, are the root's read-only layers (host
	// directories, lowest first), shared like Shares; else the root is
	// Machine.Disk.
	Layers []string
	Guest  guest.Config // its Address, Gateway, Shares and Layers are set here
}

// HostShare is a host directory shown read-only in the guest.
type HostShare struct{ Source, Target string }

// VM is a running guest.
type VM struct {
	spec    VMSpec
	ns      netns.NsHandle
	nsFile  *os.File
	host    *os.File
	qemu    *exec.Cmd
	fsds    []*exec.Cmd
	mounts  []string
	console *tail
	done    chan struct{}
	stop    sync.Once
	// nsMu keeps the namespace handles open while a Dial uses them; Stop
	// closes them under it (a closed descriptor's number, reused, would
	// send a thread into another namespace).
	nsMu     sync.RWMutex
	nsClosed bool
}

// Start boots a guest: its network namespace with the tap, the shares'
// read-only binds and virtiofsd, and QEMU in the namespace. On failure
// nothing is left (but Dir).
func Start(ctx context.Context, s VMSpec) (vm *VM, err error) {
	v := &VM{spec: s, console: newTail(64 << 10), done: make(chan struct{})}
	defer func() {
		if err != nil {
			v.Stop()
		}
	}()
	h, err := netns.Get() // this thread was never moved: the node's
	if err != nil {
		return nil, err
	}
	v.host = os.NewFile(uintptr(h), "host-netns")
	if v.ns, err = hostproc.NewNetNS(); err != nil {
		return nil, err
	}
	v.nsFile = os.NewFile(uintptr(v.ns), "vm-netns")
	if err := hostproc.InNetNS(v.nsFile, v.host, makeTap); err != nil {
		return nil, err
	}
	m := s.Machine
	m.Tap = tapName
	g := s.Guest
	g.Address, g.Gateway = guestAddr+"/30", hostAddr
	g.Shares, g.Layers = nil, nil
	for i, layer := range s.Layers {
		tag := "layer" + strconv.Itoa(i)
		sock, err := v.share(ctx, tag, layer)
		if err != nil {
			return nil, err
		}
		m.Shares = append(m.Shares, Share{Tag: tag, Socket: sock})
		g.Layers = append(g.Layers, tag)
	}
	for i, sh := range s.Shares {
		tag := "share" + strconv.Itoa(i)
		sock, err := v.share(ctx, tag, sh.Source)
		if err != nil {
			return nil, err
		}
		m.Shares = append(m.Shares, Share{Tag: tag, Socket: sock})
		g.Shares = append(g.Shares, guest.Share{Tag: tag, Target: sh.Target})
	}
	cfg, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	m.Config = filepath.Join(s.Dir, "guest.json")
	if err := os.WriteFile(m.Config, cfg, 0o600); err != nil {
		return nil, err
	}
	v.qemu = exec.Command(s.QEMU, qemuArgs(m)...)
	v.qemu.Stdout, v.qemu.Stderr = v.console, v.console
	v.qemu.SysProcAttr = &unix.SysProcAttr{Pdeathsig: unix.SIGKILL}
	if err := hostproc.InNetNS(v.nsFile, v.host, v.qemu.Start); err != nil { // QEMU in the namespace
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	go func() {
		_ = v.qemu.Wait()
		close(v.done)
	}()
	return v, nil
}

// makeTap makes the tap (in the VM's namespace, on the calling thread).
func makeTap() error {
	tap := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: tapName}, Mode: netlink.TUNTAP_MODE_TAP, Flags: netlink.TUNTAP_DEFAULTS}
	if err := netlink.LinkAdd(tap); err != nil {
		return fmt.Errorf("the guest's tap: %w", err)
	}
	for _, fd := range tap.Fds {
		fd.Close() // persistent: QEMU opens it by name
	}
	addr, err := netlink.ParseAddr(hostAddr + "/30")
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(tap, addr); err != nil {
		return err
	}
	return netlink.LinkSetUp(tap)
}

// share binds source read-only under the VM's directory and starts a
// virtiofsd that serves it; it returns the virtiofsd's socket.
func (v *VM) share(ctx context.Context, tag, source string) (string, error) {
	mnt := filepath.Join(v.spec.Dir, tag)
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return "", err
	}
	if err := unix.Mount(source, mnt, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return "", fmt.Errorf("bind %s: %w", source, err)
	}
	v.mounts = append(v.mounts, mnt)
	if err := unix.Mount("", mnt, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return "", fmt.Errorf("make %s read-only: %w", mnt, err)
	}
	sock := filepath.Join(v.spec.Dir, tag+".sock")
	fsd := exec.Command(v.spec.Virtiofsd, "--socket-path="+sock, "-o", "source="+mnt, "-o", "cache=auto", "-o", "sandbox=namespace")
	fsd.Stdout, fsd.Stderr = v.console, v.console
	fsd.SysProcAttr = &unix.SysProcAttr{Pdeathsig: unix.SIGKILL}
	if err := fsd.Start(); err != nil {
		return "", fmt.Errorf("start virtiofsd: %w", err)
	}
	v.fsds = append(v.fsds, fsd)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return sock, nil
		}
		if err := ctx.Err(); err != nil {
			return "", errs.Mark(errs.Canceled, err)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("virtiofsd made no socket for %s", source)
		}
	}
}

// Dial connects to port on the guest, from the VM's namespace.
func (v *VM) Dial(ctx context.Context, port int) (net.Conn, error) {
	v.nsMu.RLock()
	defer v.nsMu.RUnlock()
	if v.nsClosed {
		return nil, errs.New(errs.NotFound, "the guest has stopped")
	}
	var c net.Conn
	err := hostproc.InNetNS(v.nsFile, v.host, func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", net.JoinHostPort(guestAddr, strconv.Itoa(port)))
		return err
	})
	return c, err
}

// Processes are the host processes the VM runs (QEMU, the virtiofsds),
// named for good (pid and start time).
func (v *VM) Processes() []isolation.Handle {
	var out []isolation.Handle
	for _, c := range append([]*exec.Cmd{v.qemu}, v.fsds...) {
		if c == nil || c.Process == nil {
			continue
		}
		st, _ := hostproc.StartTime(c.Process.Pid)
		out = append(out, isolation.Handle{PID: c.Process.Pid, StartTime: st})
	}
	return out
}

// Done is closed once QEMU has exited.
func (v *VM) Done() <-chan struct{} { return v.done }

// Console is the end of what the guest's console and the VMM printed.
func (v *VM) Console() string { return v.console.String() }

// Stop ends QEMU and the virtiofsds, removes the shares' binds and the
// network namespace (its tap with it). It is safe to call twice.
func (v *VM) Stop() error {
	var errsSeen []error
	v.stop.Do(func() {
		if v.qemu != nil && v.qemu.Process != nil {
			_ = v.qemu.Process.Kill()
			<-v.done
		}
		for _, fsd := range v.fsds {
			_ = fsd.Process.Kill()
			_ = fsd.Wait()
		}
		for _, mnt := range v.mounts {
			if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
				errsSeen = append(errsSeen, fmt.Errorf("unmount %s: %w", mnt, err))
			}
		}
		v.nsMu.Lock()
		v.nsClosed = true
		if v.nsFile != nil {
			v.nsFile.Close()
		}
		if v.host != nil {
			v.host.Close()
		}
		v.nsMu.Unlock()
	})
	return errors.Join(errsSeen...)
}

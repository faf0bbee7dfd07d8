package microvm

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
	"github.com/covesandbox/cove/internal/isolation/microvm/guest"
	"github.com/covesandbox/cove/internal/logx"
)

// Link-local addresses of a guest's private network: the host's end of
// the tap and the guest's eth0 (each VM has a network namespace of its
// own, so every VM uses the same pair).
const (
	tapName   = "tap0"
	hostAddr  = guest.NodeAddr
	guestAddr = guest.GuestAddr
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
	// Shares are host directories the guest sees at their targets: each
	// is bound under Dir and served by a virtiofsd of its own, or, when it
	// has an Image, is that image's disk.
	Shares []HostShare
	// Layers are the images of the root's read-only layers (erofs,
	// lowest first: MakeLayerImage).
	Layers []string
	// NetNS, when set, is a namespace of the node's network pool for the
	// guest (routeGuest); nil gives it one of its own, with no way out.
	// Start keeps a handle of its own to it.
	NetNS *os.File
	// Cgroup, when set, takes QEMU and the virtiofsds (before the guest
	// runs).
	Cgroup *cgroups.Group
	Guest  guest.Config // its Address, Gateway, Shares and Layers are set here
	// Incoming, when set, is a machine's saved state (QEMU's migration
	// stream) to run instead of booting: the guest is left stopped
	// (Checkpoint, Restore).
	Incoming *os.File
}

// HostShare is a host directory shown in the guest: read-only, or
// Writable (a volume; nosuid and nodev either way). A read-only one with
// an Image (an erofs image of Source: bindImages) is that disk instead of
// a virtiofs share: QEMU can save such a guest.
type HostShare struct {
	Source, Target string
	Writable       bool
	Image          string `json:",omitempty"`
}

// VM is a running guest.
type VM struct {
	dir     string
	nsFile  *os.File     // the guest's network namespace
	host    *os.File     // the node's
	pool    *PoolAddress // the namespace is the pool's: the sandbox's address, routed to the guest
	qemu    proc
	fsds    []proc
	mounts  []string
	console *tail
	// deferred is where QEMU reads the saved machine from once told
	// (Machine.incomingDeferred), for waitIncoming.
	deferred string
	conn     net.Conn // the serial console's socket
	conLog   *os.File
	done     chan struct{}
	stop     sync.Once
	// nsMu keeps the namespace handles open while a Dial uses them; Stop
	// closes them under it (a closed descriptor's number, reused, would
	// send a thread into another namespace).
	nsMu     sync.RWMutex
	nsClosed bool
	// conns are the connections dialed into the guest, closed when it
	// stops: a guest that is gone sends no FIN or RST to end them.
	connMu    sync.Mutex
	conns     map[*guestConn]struct{}
	connsDone bool
	watch     sync.Once
}

// guestConn is a connection into the guest, forgotten when closed.
type guestConn struct {
	net.Conn
	v *VM
}

func (c *guestConn) Close() error {
	c.v.connMu.Lock()
	delete(c.v.conns, c)
	c.v.connMu.Unlock()
	return c.Conn.Close()
}

// track keeps c until it is closed or the guest stops.
func (v *VM) track(c net.Conn) (net.Conn, error) {
	v.watch.Do(func() {
		go func() {
			<-v.done
			v.connMu.Lock()
			v.connsDone = true
			for c := range v.conns {
				c.Conn.Close()
			}
			v.conns = nil
			v.connMu.Unlock()
		}()
	})
	v.connMu.Lock()
	defer v.connMu.Unlock()
	if v.connsDone {
		c.Close()
		return nil, errs.New(errs.NotFound, "the guest has stopped")
	}
	if v.conns == nil {
		v.conns = map[*guestConn]struct{}{}
	}
	gc := &guestConn{Conn: c, v: v}
	v.conns[gc] = struct{}{}
	return gc, nil
}

// proc is a host process of a VM: started by this node (cmd), or adopted
// from an earlier one.
type proc struct {
	h   isolation.Handle
	cmd *exec.Cmd
}

// Record is what a node keeps of a VM in its directory (recordFile) to
// find it again after a restart: its processes (QEMU first) and, when its
// namespace is the pool's, the sandbox's address there.
type Record struct {
	Processes []isolation.Handle `json:"processes"`
	Pool      *PoolAddress       `json:"pool,omitempty"`
	// The driver's: the VM's cgroup and its sandbox's limits, and its
	// machine, layers and guest's config (what a Restore boots again).
	Cgroup  string           `json:"cgroup,omitempty"`
	Limits  isolation.Limits `json:"limits"`
	Machine Machine          `json:"machine"`
	Layers  []string         `json:"layers,omitempty"`
	Shares  []HostShare      `json:"shares,omitempty"`
	Guest   guest.Config     `json:"guest"`
}

// Files in a VM's directory.
const (
	recordFile    = "vm.json"
	consoleSocket = "console.sock"
	consoleLog    = "console.log" // the serial console, which the agent logs to
)

// consoleMax caps what a guest's console writes to its log on the host:
// the guest's root may write there.
const consoleMax = 8 << 20

// virtioTransports are the virtio devices a guest takes: QEMU's microvm
// machine has 24 transports, but a guest with all 24 in use hung at its
// first request to a disk (measured: with 23, every disk answers).
const virtioTransports = 23

// fixedDevices are a guest's devices but its layers and shares: the
// writable disk, the balloon and the network.
const fixedDevices = 3

// Start boots a guest: its network (a namespace of its own, or the pool's
// routed to it), the shares' read-only binds and virtiofsd, and QEMU in
// the namespace. QEMU and the virtiofsds run in sessions of their own and
// outlive the node (Adopt finds them again). On failure nothing is left
// (but Dir).
func Start(ctx context.Context, s VMSpec) (vm *VM, err error) {
	if n := len(s.Layers) + len(s.Shares); n+fixedDevices > virtioTransports {
		return nil, errs.New(errs.InvalidArgument, "a guest takes at most %d layers and shared directories, not %d", virtioTransports-fixedDevices, n)
	}
	v := &VM{dir: s.Dir, console: newTail(64 << 10), done: make(chan struct{})}
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
	if s.NetNS != nil {
		fd, err := unix.FcntlInt(s.NetNS.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		v.nsFile = os.NewFile(uintptr(fd), "vm-netns")
		var pa PoolAddress
		if err := hostproc.InNetNS(v.nsFile, v.host, func() (err error) { pa, err = readPoolAddress(); return err }); err != nil {
			return nil, err
		}
		v.pool = &pa // from here Stop puts the namespace back
		if err := hostproc.InNetNS(v.nsFile, v.host, func() error { return routeGuest(pa) }); err != nil {
			return nil, err
		}
	} else {
		ns, err := hostproc.NewNetNS()
		if err != nil {
			return nil, err
		}
		v.nsFile = os.NewFile(uintptr(ns), "vm-netns")
		if err := hostproc.InNetNS(v.nsFile, v.host, makeTap); err != nil {
			return nil, err
		}
	}
	m := s.Machine
	m.Tap = tapName
	m.Console = filepath.Join(s.Dir, consoleSocket)
	m.QMP = filepath.Join(s.Dir, qmpSocket)
	g := s.Guest
	g.Address, g.Gateway, g.LinkLocal = guestAddr+"/30", hostAddr, ""
	if v.pool != nil { // the sandbox's address, and the node's pair for its dials
		g.Address, g.Gateway, g.LinkLocal = v.pool.Addr.String(), v.pool.Gateway.String(), guestAddr+"/30"
	}
	g.Shares, g.Layers = nil, nil
	m.Layers, m.Binds = s.Layers, nil
	for i := range s.Layers {
		g.Layers = append(g.Layers, guest.LayerSerial(i))
	}
	for i, sh := range s.Shares {
		if sh.Image != "" {
			g.Shares = append(g.Shares, guest.Share{Disk: guest.BindSerial(len(m.Binds)), Target: sh.Target})
			m.Binds = append(m.Binds, sh.Image)
			continue
		}
		tag := "share" + strconv.Itoa(i)
		sock, err := v.share(ctx, s.Virtiofsd, s.Cgroup, tag, sh.Source, sh.Writable)
		if err != nil {
			return nil, err
		}
		m.Shares = append(m.Shares, Share{Tag: tag, Socket: sock})
		g.Shares = append(g.Shares, guest.Share{Tag: tag, Target: sh.Target, Writable: sh.Writable})
	}
	cfg, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	m.Config = filepath.Join(s.Dir, "guest.json")
	if err := os.WriteFile(m.Config, cfg, 0o600); err != nil {
		return nil, err
	}
	uid, lock, err := takeVMMUser(VMMUserDir)
	if err != nil {
		return nil, err
	}
	defer lock.Close() // QEMU holds the uid with its own copy
	m.User, m.Jail = uid, filepath.Join(s.Dir, "jail")
	if err := os.Mkdir(m.Jail, 0o500); err != nil {
		return nil, err
	}
	// QEMU inherits its uid's lock, its disks' descriptors and the saved
	// machine: fd 3 onwards.
	files := []*os.File{lock}
	inherit := func(f *os.File) int {
		files = append(files, f)
		return 3 + len(files) - 1
	}
	var disks []*os.File // QEMU has its own copies
	defer func() {
		for _, f := range disks {
			f.Close()
		}
	}()
	m.diskFDs = map[string][]int{}
	for _, img := range slices.Concat(m.Layers, m.Binds, []string{m.Writable}) {
		if img == "" {
			continue
		}
		ro, err := os.Open(img)
		if err != nil {
			return nil, err
		}
		disks = append(disks, ro)
		m.diskFDs[img] = []int{inherit(ro)}
		if img == m.Writable {
			rw, err := os.OpenFile(img, os.O_RDWR, 0)
			if err != nil {
				return nil, err
			}
			disks = append(disks, rw)
			m.diskFDs[img] = append(m.diskFDs[img], inherit(rw))
		}
	}
	if s.Incoming != nil {
		m.Incoming = "fd:" + strconv.Itoa(inherit(s.Incoming))
		if m.incomingDeferred() {
			v.deferred = m.Incoming
		}
	}
	qemu := exec.Command(s.QEMU, qemuArgs(m)...)
	qemu.Stdout, qemu.Stderr = v.console, v.console
	qemu.ExtraFiles = files
	qemu.SysProcAttr = &unix.SysProcAttr{Setsid: true}
	if err := hostproc.InNetNS(v.nsFile, v.host, qemu.Start); err != nil { // QEMU in the namespace
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	v.qemu = started(qemu)
	go func() {
		_ = qemu.Wait()
		close(v.done)
	}()
	if err := join(s.Cgroup, qemu.Process.Pid); err != nil { // QEMU waits for its console: the guest has not run
		return nil, err
	}
	// QEMU runs the guest once the console is attached.
	if err := v.attachConsole(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// started names a process this node started.
func started(c *exec.Cmd) proc {
	st, _ := hostproc.StartTime(c.Process.Pid)
	return proc{h: isolation.Handle{PID: c.Process.Pid, StartTime: st}, cmd: c}
}

// join moves pid and its descendants into cg (nil: none). A process on
// cgroup v1 joins alone, so each is moved.
func join(cg *cgroups.Group, pid int) error {
	if cg == nil {
		return nil
	}
	if err := cg.Add(pid); err != nil {
		return err
	}
	kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, f := range strings.Fields(string(kids)) {
		kid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if err := join(cg, kid); err != nil {
			return err
		}
	}
	return nil
}

// Record is what to keep of the VM to find it again.
func (v *VM) Record() Record {
	r := Record{Processes: []isolation.Handle{v.qemu.h}, Pool: v.pool}
	for _, p := range v.fsds {
		r.Processes = append(r.Processes, p.h)
	}
	return r
}

// Adopt finds the VM an earlier node left in dir (its Record in
// recordFile): its processes, its namespace and its console. A VM whose
// QEMU has exited is adopted ended (Done is closed), so that Stop
// removes what is left of it.
func Adopt(dir string) (*VM, Record, error) {
	var r Record
	b, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return nil, r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, r, fmt.Errorf("%s: %w", recordFile, err)
	}
	if len(r.Processes) == 0 {
		return nil, r, fmt.Errorf("%s names no process", recordFile)
	}
	v := &VM{dir: dir, pool: r.Pool, console: newTail(64 << 10), done: make(chan struct{})}
	v.qemu = proc{h: r.Processes[0]}
	for _, h := range r.Processes[1:] {
		v.fsds = append(v.fsds, proc{h: h})
	}
	mps, err := fsutil.MountsUnder(dir)
	if err != nil {
		return nil, r, err
	}
	v.mounts = mps
	h, err := netns.Get()
	if err != nil {
		return nil, r, err
	}
	v.host = os.NewFile(uintptr(h), "host-netns")
	pidfd, err := unix.PidfdOpen(v.qemu.h.PID, 0)
	if err == nil && hostproc.Alive(v.qemu.h) { // the pidfd pins it: its /proc is QEMU's
		v.nsFile, err = os.Open(fmt.Sprintf("/proc/%d/ns/net", v.qemu.h.PID))
		if err == nil {
			err = v.attachConsole(context.Background())
		}
		if err != nil {
			unix.Close(pidfd)
			v.closeFiles()
			return nil, r, err
		}
		go func() {
			hostproc.WaitPidfd(pidfd)
			unix.Close(pidfd)
			close(v.done)
		}()
		return v, r, nil
	}
	if err == nil {
		unix.Close(pidfd)
	}
	v.nsClosed = true // QEMU is gone, and its namespace with it
	close(v.done)
	return v, r, nil
}

// attachConsole connects to QEMU's serial console socket and copies what
// the guest writes there into the console's tail and its log (capped).
func (v *VM) attachConsole(ctx context.Context) error {
	path := filepath.Join(v.dir, consoleSocket)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c, err := net.Dial("unix", path)
		if err == nil {
			v.conn = c
			break
		}
		select {
		case <-v.done:
			return errors.New("qemu exited before its console was attached")
		case <-ctx.Done():
			return errs.Mark(errs.Canceled, ctx.Err())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the guest's console: %w", err)
		}
	}
	f, err := os.OpenFile(filepath.Join(v.dir, consoleLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	v.conLog = f
	st, err := f.Stat()
	if err != nil {
		return err
	}
	w := io.MultiWriter(v.console, logx.Capped(f, max(consoleMax-st.Size(), 0)))
	go func() { _, _ = io.Copy(w, v.conn) }()
	return nil
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
func (v *VM) share(ctx context.Context, virtiofsd string, cg *cgroups.Group, tag, source string, writable bool) (string, error) {
	mnt := filepath.Join(v.dir, tag)
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return "", err
	}
	if err := unix.Mount(source, mnt, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return "", fmt.Errorf("bind %s: %w", source, err)
	}
	v.mounts = append(v.mounts, mnt)
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	if !writable {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("", mnt, "", flags, ""); err != nil {
		return "", fmt.Errorf("restrict %s: %w", mnt, err)
	}
	sock := filepath.Join(v.dir, tag+".sock")
	args := []string{"--socket-path=" + sock, "-o", "source=" + mnt, "-o", "cache=auto", "-o", "sandbox=namespace",
		// Extended attributes: the guest's overlay reads the layers'
		// opaque markers (user.*; trusted.* stays the host's).
		"-o", "xattr"}
	if !writable {
		// The eight capabilities virtiofsd keeps of root's (its serving
		// process has no other) are for writes: owners, modes and the
		// guest's ids on what it creates. A read-only share's drops them.
		args = append(args, "-o", "modcaps="+readOnlyShareCaps)
	}
	fsd := exec.Command(virtiofsd, args...)
	fsd.Stdout, fsd.Stderr = v.console, v.console
	fsd.SysProcAttr = &unix.SysProcAttr{Setsid: true}
	if err := fsd.Start(); err != nil {
		return "", fmt.Errorf("start virtiofsd: %w", err)
	}
	v.fsds = append(v.fsds, started(fsd))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil { // it has forked its server: both join
			return sock, join(cg, fsd.Process.Pid)
		}
		if err := ctx.Err(); err != nil {
			return "", errs.Mark(errs.Canceled, err)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("virtiofsd made no socket for %s", source)
		}
	}
}

// readOnlyShareCaps drops every capability virtiofsd keeps by default.
const readOnlyShareCaps = "-chown:-dac_override:-fowner:-fsetid:-setgid:-setuid:-mknod:-setfcap"

// SetClock sets the guest's clock to the host's, through its init
// (guest.ControlPort): a guest's clock starts from the RTC's second and
// stands still while the machine is stopped.
func (v *VM) SetClock(ctx context.Context) error {
	return v.control(ctx, "the guest's clock", func(c net.Conn) error { return guest.SetClock(c, time.Now()) })
}

// SetAddress moves the guest to the pool's address pa (restored into
// another namespace of the pool), through its init.
func (v *VM) SetAddress(ctx context.Context, pa PoolAddress) error {
	return v.control(ctx, "the guest's address", func(c net.Conn) error {
		return guest.SetAddress(c, guest.Address{Address: pa.Addr.String(), Gateway: pa.Gateway.String()})
	})
}

// Thaw ends an export the guest's init still waits on and thaws its
// sandbox (a copy of a machine saved during one), through its init.
func (v *VM) Thaw(ctx context.Context) error {
	return v.control(ctx, "the guest's sandbox thawed", func(c net.Conn) error { return guest.Thaw(c) })
}

// Reseed gives the guest kernel's random number generator a seed from the
// host's (a guest started from a saved machine), through its init.
func (v *VM) Reseed(ctx context.Context) error {
	seed := make([]byte, guest.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return err
	}
	return v.control(ctx, "the guest's random seed", func(c net.Conn) error { return guest.Reseed(c, seed) })
}

// SetHostname names the guest (a copy of another), through its init.
func (v *VM) SetHostname(ctx context.Context, name string) error {
	return v.control(ctx, "the guest's host name", func(c net.Conn) error { return guest.SetHostname(c, name) })
}

// control makes a request of the guest's init (guest.ControlPort), for
// 10 s at most.
func (v *VM) control(ctx context.Context, what string, request func(net.Conn) error) error {
	c, err := v.dial(ctx, guest.ControlPort)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := request(c); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// agentPort is the agent's, which listens on the guest's address.
const agentPort = 49983

// Dial connects to port on the guest's loopback (the agent's port on its
// address), from the VM's namespace, through the init's forwarder
// (guest.ForwardPort). Nothing listening there is errs.Unavailable.
func (v *VM) Dial(ctx context.Context, port int) (net.Conn, error) {
	if port == agentPort {
		return v.dial(ctx, port)
	}
	if port <= 0 || port > 65535 {
		return nil, errs.New(errs.InvalidArgument, "port %d", port)
	}
	c, err := v.dial(ctx, guest.ForwardPort)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	var answer [1]byte
	if _, err = c.Write([]byte{byte(port >> 8), byte(port)}); err == nil {
		_, err = io.ReadFull(c, answer[:])
	}
	c.SetDeadline(time.Time{})
	switch {
	case err != nil:
		c.Close()
		return nil, fmt.Errorf("the guest's forwarder: %w", err)
	case answer[0] != guest.ForwardOK:
		c.Close()
		return nil, errs.New(errs.Unavailable, "nothing listens on port %d in the guest", port)
	}
	return c, nil
}

func (v *VM) dial(ctx context.Context, port int) (net.Conn, error) {
	v.nsMu.RLock()
	defer v.nsMu.RUnlock()
	if v.nsClosed {
		return nil, errs.New(errs.NotFound, "the guest has stopped")
	}
	// A stopped guest answers nothing, not even a refusal: its end ends
	// the dial.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-v.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	c, err := hostproc.DialAddr(ctx, v.nsFile, v.host, guestAddr, port)
	if err != nil {
		return nil, err
	}
	return v.track(c)
}

// Done is closed once QEMU has exited.
func (v *VM) Done() <-chan struct{} { return v.done }

// Console is the end of what the guest's console and the VMM printed.
func (v *VM) Console() string { return v.console.String() }

// Stop ends QEMU and the virtiofsds, removes the shares' binds and the
// guest's network: its own namespace (the tap goes with it), or what
// routeGuest added to the pool's. It is safe to call twice.
func (v *VM) Stop() error {
	var errsSeen []error
	v.stop.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if v.qemu.h.PID > 0 {
			if err := v.qemu.kill(ctx, v.done); err != nil {
				errsSeen = append(errsSeen, err)
			}
		}
		for _, p := range v.fsds {
			if err := p.kill(ctx, nil); err != nil {
				errsSeen = append(errsSeen, err)
			}
		}
		for i := len(v.mounts) - 1; i >= 0; i-- { // the topmost first
			err := unix.Unmount(v.mounts[i], unix.MNT_DETACH)
			if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) { // not (or no longer) a mount
				errsSeen = append(errsSeen, fmt.Errorf("unmount %s: %w", v.mounts[i], err))
			}
		}
		v.nsMu.Lock()
		defer v.nsMu.Unlock()
		if v.pool != nil && !v.nsClosed && v.nsFile != nil { // the pool gives the namespace to the next sandbox
			if err := hostproc.InNetNS(v.nsFile, v.host, func() error { return unrouteGuest(*v.pool) }); err != nil {
				errsSeen = append(errsSeen, err)
			}
		}
		v.nsClosed = true
		v.closeFiles()
	})
	return errors.Join(errsSeen...)
}

// closeFiles closes the VM's handles: namespaces, console.
func (v *VM) closeFiles() {
	for _, f := range []*os.File{v.nsFile, v.host, v.conLog} {
		if f != nil {
			f.Close()
		}
	}
	if v.conn != nil {
		v.conn.Close()
	}
}

// kill ends the process and waits until it is gone: exited, when done is
// given, which closes then.
func (p proc) kill(ctx context.Context, done <-chan struct{}) error {
	if p.cmd != nil {
		_ = p.cmd.Process.Kill()
		if done == nil {
			_ = p.cmd.Wait()
		}
	} else if err := hostproc.Kill(p.h); err != nil {
		return err
	}
	if done != nil {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("qemu %d did not exit: %w", p.h.PID, ctx.Err())
		}
	}
	if p.cmd == nil {
		return hostproc.WaitGone(ctx, p.h)
	}
	return nil
}

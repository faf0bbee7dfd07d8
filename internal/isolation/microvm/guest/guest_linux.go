// Package guest is Cove's init inside a microVM (the sandbox binary runs
// it as the initramfs's /init): it mounts what a kernel's user space
// needs, loads the modules the initramfs brings and reports the guest on
// the console. Given a Config (QEMU's fw_cfg file ConfigName), it then
// makes the sandbox's root (the template's layers, erofs disks, under a
// writable disk or tmpfs), its network, host name and cgroup, starts the
// agent in a pid namespace of its own, locked down as a namespaces
// sandbox's (AgentMain), and serves the node the guest's loopback
// (ForwardPort) and, on ControlPort, copies of the writable layer and the
// clock; when the agent ends, or without a config, it powers the machine
// off.
package guest

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/inside"
)

// Config is what the host gives a guest that runs a sandbox.
type Config struct {
	Hostname string `json:"hostname"`
	// Address is eth0's address (CIDR), Gateway its default route.
	// LinkLocal, when set, is a second address (CIDR) on eth0 for the
	// node's dials; else they come to Address.
	Address   string `json:"address"`
	Gateway   string `json:"gateway"`
	LinkLocal string `json:"linkLocal,omitempty"`
	// DNS are the resolvers of the root's /etc/resolv.conf.
	DNS []string `json:"dns,omitempty"`
	// WritableMB sizes the tmpfs that takes the root's writes, unless
	// WritableDisk: the disk WritableSerial, an ext4 file system (user
	// extended attributes, which a 6.1 kernel's tmpfs lacks).
	WritableMB   int64 `json:"writableMB"`
	WritableDisk bool  `json:"writableDisk,omitempty"`
	// MemoryMB and PIDs limit the sandbox's processes (a cgroup in the
	// guest); the machine has more memory, for the kernel and the init.
	MemoryMB int64 `json:"memoryMB"`
	PIDs     int64 `json:"pids"`
	// Agent is the agent's path in the root (this binary), AgentEnv its
	// environment.
	Agent    string   `json:"agent"`
	AgentEnv []string `json:"agentEnv"`
	// Shares are host directories, each mounted at its target in the
	// root (the base template's /usr …): shared over virtiofs (read-only
	// but volumes), or read-only erofs images of them on disks.
	Shares []Share `json:"shares,omitempty"`
	// Layers are the serial numbers of the disks that are the root's
	// read-only layers (erofs images, lowest first).
	Layers []string `json:"layers"`
}

// Share is a host directory in the guest: the virtiofs device's tag, or
// the serial number of the disk of its image (Disk); where the root shows
// it, and whether it is writable (a volume, always virtiofs).
type Share struct {
	Tag      string `json:"tag,omitempty"`
	Disk     string `json:"disk,omitempty"`
	Target   string `json:"target"`
	Writable bool   `json:"writable,omitempty"`
}

// WritableSerial is the serial number of the guest's writable disk.
const WritableSerial = "cove-writable"

// LayerSerial is the serial number of the disk of the root's layer i.
func LayerSerial(i int) string { return "cove-layer" + strconv.Itoa(i) }

// BindSerial is the serial number of the disk of the image of the
// read-only bind i.
func BindSerial(i int) string { return "cove-bind" + strconv.Itoa(i) }

// ConfigName is the fw_cfg file the host passes the Config in.
const ConfigName = "opt/cove/config"

// configPath is where the guest's kernel shows it (qemu_fw_cfg).
const configPath = "/sys/firmware/qemu_fw_cfg/by_name/" + ConfigName + "/raw"

// Is reports whether this process is a microVM's init.
func Is() bool { return os.Getpid() == 1 && os.Args[0] == "/init" }

// agentArg0 names the agent the init starts.
const agentArg0 = "cove-guest-agent"

// IsAgent reports whether this process is the agent a guest's init
// started: PID 1 of the sandbox's own pid namespace.
func IsAgent() bool { return os.Getpid() == 1 && os.Args[0] == agentArg0 }

// AgentMain runs the agent: the sandbox's /proc, then the agent locked
// down as a namespaces sandbox's is. The init passes the sandbox cgroup's
// OOM counter as descriptor 3.
func AgentMain() int {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fmt.Fprintf(os.Stderr, "cove-guest agent: %v\n", err)
		return 1
	}
	if err := inside.MountProc("/", "", false); err != nil {
		fmt.Fprintf(os.Stderr, "cove-guest agent: /proc: %v\n", err)
		return 1
	}
	unix.CloseOnExec(3)
	return inside.ServeLockedDown(3)
}

// Ready is what the init prints on the console once the guest is up.
const Ready = "cove-guest: up"

// Main runs the init; it does not return unless powering off fails.
func Main() int {
	err := start()
	if err == nil {
		var raw []byte
		raw, err = os.ReadFile(configPath)
		switch {
		case errors.Is(err, os.ErrNotExist):
			err = nil // a probe: the report was all
		case err == nil:
			err = becomeSandbox(raw) // returns only on failure
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cove-guest: %v\n", err)
	}
	unix.Sync()
	// The machine stops; QEMU exits with it.
	if perr := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); perr != nil {
		fmt.Fprintf(os.Stderr, "cove-guest: power off: %v\n", perr)
	}
	return 1
}

func start() error {
	for _, m := range []struct{ fs, dir string }{{"devtmpfs", "/dev"}, {"proc", "/proc"}, {"sysfs", "/sys"}} {
		if err := unix.Mount(m.fs, m.dir, m.fs, unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount %s: %w", m.dir, err)
		}
	}
	// The kernel found no /dev/console in the initramfs to give init:
	// its standard streams are the console from now on.
	console, err := os.OpenFile("/dev/console", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	for fd := range 3 {
		if err := unix.Dup2(int(console.Fd()), fd); err != nil {
			return err
		}
	}
	n, err := loadModules("/cove/modules")
	if err != nil {
		return err
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return err
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return err
	}
	fmt.Printf("%s release=%s boot_id=%s modules=%d\n", Ready, unix.ByteSliceToString(uts.Release[:]), strings.TrimSpace(string(boot)), n)
	return nil
}

// loadModules loads the modules the list names, in its order.
func loadModules(list string) (int, error) {
	f, err := os.Open(list)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.TrimSpace(sc.Text())
		if p == "" {
			continue
		}
		m, err := os.Open(p)
		if err != nil {
			return n, err
		}
		err = unix.FinitModule(int(m.Fd()), "", 0)
		m.Close()
		if err != nil && err != unix.EEXIST {
			return n, fmt.Errorf("load %s: %w", p, err)
		}
		n++
	}
	return n, sc.Err()
}

// becomeSandbox makes the sandbox's root, network and cgroup from the
// config, starts the agent and returns when it ends.
func becomeSandbox(raw []byte) error {
	var cfg Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("the config: %w", err)
	}
	for _, d := range []string{"/lower", "/upper", "/newroot"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	lower, err := lowerDirs(cfg.Layers)
	if err != nil {
		return err
	}
	if cfg.WritableDisk {
		disk, err := diskWithSerial(WritableSerial)
		if err == nil {
			err = unix.Mount(disk, "/upper", "ext4", unix.MS_NOSUID|unix.MS_NODEV, "discard,minixdf") // df: the disk limit
		}
		if err != nil {
			return fmt.Errorf("the writable disk: %w", err)
		}
	} else if err := unix.Mount("tmpfs", "/upper", "tmpfs", 0, fmt.Sprintf("size=%dm,mode=0755", max(cfg.WritableMB, 16))); err != nil {
		return fmt.Errorf("the writable layer: %w", err)
	}
	for _, d := range []string{"/upper/data", "/upper/work"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	// userxattr: the layers' opaque markers the overlay reads are their
	// user.* ones (the host keeps trusted.* from the guest), and so are
	// those it writes in the upper (ControlPort's export).
	opts := "userxattr," + isolation.SelfContainedUpper + ",lowerdir=" + lower + ",upperdir=/upper/data,workdir=/upper/work"
	if err := unix.Mount("overlay", "/newroot", "overlay", 0, opts); err != nil {
		return fmt.Errorf("the root: %w", err)
	}
	// The guest's own files, in its own writable layer: a link in the
	// template's /etc can only lead elsewhere in the guest.
	if err := isolation.WriteIdentity("/newroot", cfg.Hostname, cfg.DNS); err != nil {
		return err
	}
	for _, sh := range cfg.Shares {
		dst := "/newroot" + sh.Target
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		flags := uintptr(unix.MS_NODEV | unix.MS_NOSUID)
		if !sh.Writable {
			flags |= unix.MS_RDONLY
		}
		src, fstype := sh.Tag, "virtiofs"
		if sh.Disk != "" {
			disk, err := diskWithSerial(sh.Disk)
			if err != nil {
				return err
			}
			src, fstype = disk, "erofs"
		}
		if err := unix.Mount(src, dst, fstype, flags, ""); err != nil {
			return fmt.Errorf("share %s at %s: %w", cmp.Or(sh.Tag, sh.Disk), sh.Target, err)
		}
	}
	// The agent is this binary, bound read-only where the root expects it.
	agent := "/newroot" + cfg.Agent
	if err := os.MkdirAll(agent[:strings.LastIndexByte(agent, '/')], 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(agent, nil, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("/init", agent, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	if err := unix.Mount("", agent, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		return err
	}
	// The sandbox's /dev is a container's (no disk, no console), its
	// /proc its own pid namespace's; it has no /sys.
	if err := os.MkdirAll("/newroot/dev", 0o755); err != nil {
		return err
	}
	if err := inside.MountDev("/newroot", isolation.Limits{MemoryMB: cfg.MemoryMB}.ShmBytes(), false); err != nil {
		return fmt.Errorf("/dev: %w", err)
	}
	if err := os.MkdirAll("/newroot/proc", 0o555); err != nil {
		return err
	}
	if err := network(cfg); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return err
	}
	group, oom, err := sandboxCgroup(cfg.MemoryMB, cfg.PIDs)
	if err != nil {
		return fmt.Errorf("the sandbox's cgroup: %w", err)
	}
	if err := kernelSettings(); err != nil {
		return err
	}
	cmd := &exec.Cmd{
		Path: cfg.Agent, Args: []string{agentArg0}, Env: cfg.AgentEnv, Dir: "/",
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, ExtraFiles: []*os.File{oom},
		SysProcAttr: &unix.SysProcAttr{Chroot: "/newroot", Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS,
			UseCgroupFD: true, CgroupFD: int(group.Fd())},
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the agent: %w", err)
	}
	group.Close()
	oom.Close()
	if dials := cmp.Or(cfg.LinkLocal, cfg.Address); dials != "" {
		ip, _, err := net.ParseCIDR(dials)
		if err != nil {
			return err
		}
		if err := serveForwards(ip.String()); err != nil {
			return fmt.Errorf("the loopback forwarder: %w", err)
		}
		if err := serveControl(ip.String(), "/upper/data", sandboxGroup, Address{Address: cfg.Address, Gateway: cfg.Gateway}, "/newroot", cfg.DNS); err != nil {
			return fmt.Errorf("the node's control port: %w", err)
		}
	}
	// The machine lives as long as its agent.
	return fmt.Errorf("the agent ended: %v", cmd.Wait())
}

// kernelSettings are the guest kernel's settings for a sandbox: what a
// host sets for its containers, and an allocation refused by the
// cgroup's limit (an OOM kill the agent reports), as on a host, not up
// front by the machine's size.
func kernelSettings() error {
	for _, kv := range [][2]string{
		{"vm/overcommit_memory", "1"},
		{"kernel/kptr_restrict", "2"},
		{"kernel/dmesg_restrict", "1"},
		{"kernel/perf_event_paranoid", "3"},
		{"kernel/unprivileged_bpf_disabled", "1"},
	} {
		if err := os.WriteFile("/proc/sys/"+kv[0], []byte(kv[1]), 0); err != nil {
			return fmt.Errorf("%s: %w", kv[0], err)
		}
	}
	return nil
}

// sandboxGroup is the cgroup of the sandbox's processes.
const sandboxGroup = "/sys/fs/cgroup/sandbox"

// sandboxCgroup makes the cgroup of the sandbox's processes with its
// limits, and returns it and its OOM counter (memory.events).
func sandboxCgroup(memoryMB, pids int64) (group, oom *os.File, err error) {
	root := filepath.Dir(sandboxGroup)
	if err := unix.Mount("cgroup2", root, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(root+"/cgroup.subtree_control", []byte("+memory +pids"), 0); err != nil {
		return nil, nil, err
	}
	dir := sandboxGroup
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, nil, err
	}
	for file, v := range map[string]int64{"memory.max": memoryMB << 20, "pids.max": pids} {
		if err := os.WriteFile(dir+"/"+file, []byte(strconv.FormatInt(v, 10)), 0); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	if group, err = os.Open(dir); err != nil {
		return nil, nil, err
	}
	if oom, err = os.Open(dir + "/memory.events"); err != nil {
		group.Close()
		return nil, nil, err
	}
	return group, oom, nil
}

// lowerDirs mounts the root's read-only layers, the erofs disks with
// these serial numbers, and returns overlayfs's lowerdir (the top layer
// first).
func lowerDirs(layers []string) (string, error) {
	if len(layers) == 0 {
		return "", errors.New("the root has no layer")
	}
	dirs := make([]string, len(layers))
	for i, serial := range layers {
		disk, err := diskWithSerial(serial)
		if err != nil {
			return "", err
		}
		d := fmt.Sprintf("/lower/%d", i)
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", err
		}
		if err := unix.Mount(disk, d, "erofs", unix.MS_RDONLY|unix.MS_NODEV|unix.MS_NOSUID, ""); err != nil {
			return "", fmt.Errorf("layer %d: %w", i, err)
		}
		dirs[len(layers)-1-i] = d
	}
	return strings.Join(dirs, ":"), nil
}

// network brings up lo and eth0 with the config's address and route;
// IPv4 only, as a sandbox's link on a host is.
func network(cfg Config) error {
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		err = netlink.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("lo: %w", err)
	}
	if cfg.Address == "" {
		return nil
	}
	var addrs []*netlink.Addr
	for _, a := range []string{cfg.Address, cfg.LinkLocal} {
		if a == "" {
			continue
		}
		addr, err := netlink.ParseAddr(a)
		if err != nil {
			return err
		}
		addrs = append(addrs, addr)
	}
	var eth netlink.Link
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if eth, err = netlink.LinkByName("eth0"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("eth0: %w", err)
	}
	// No IPv6 on it (no link-local address); lo keeps ::1.
	for _, conf := range []string{"default", "eth0"} {
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+conf+"/disable_ipv6", []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("IPv6 off: %w", err)
		}
	}
	// A gratuitous ARP for each address as eth0 comes up: the node's
	// first SYNs to the guest wait for its MAC, which the node would ask
	// for again only after a second.
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/eth0/arp_notify", []byte("1"), 0); err != nil {
		return fmt.Errorf("arp_notify: %w", err)
	}
	for _, addr := range addrs {
		if err := netlink.AddrAdd(eth, addr); err != nil {
			return fmt.Errorf("eth0's address %s: %w", addr, err)
		}
	}
	if err := netlink.LinkSetUp(eth); err != nil {
		return err
	}
	if cfg.Gateway != "" {
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: net.ParseIP(cfg.Gateway)}); err != nil {
			return fmt.Errorf("the default route: %w", err)
		}
	}
	return nil
}

// diskWithSerial waits until the disk with this serial number appears
// (its driver probes it) and returns its device node.
func diskWithSerial(serial string) (string, error) {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		disks, _ := filepath.Glob("/sys/block/vd*")
		for _, d := range disks {
			if b, err := os.ReadFile(d + "/serial"); err == nil && strings.TrimSpace(string(b)) == serial {
				dev := "/dev/" + filepath.Base(d)
				if _, err := os.Stat(dev); err == nil {
					return dev, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no disk %s after 10s", serial)
		}
	}
}

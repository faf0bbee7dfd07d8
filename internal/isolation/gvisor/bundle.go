package gvisor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/inside"
)

// keptCaps are the capabilities the agent (and root in the sandbox) keeps:
// the namespaces driver's set, which gVisor applies inside its kernel.
var keptCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
	"CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_AUDIT_WRITE",
}

// bundleSpec is the OCI runtime spec of a sandbox whose root is rootfs and
// whose network namespace is at netnsPath, and whose group counts its OOM
// kills in oomFile.
func (d *Driver) bundleSpec(id, rootfs, netnsPath, oomFile string, spec isolation.Spec) (*specs.Spec, error) {
	sandboxEnv, err := json.Marshal(spec.Env)
	if err != nil {
		return nil, err
	}
	agent, err := json.Marshal(spec.Agent)
	if err != nil {
		return nil, err
	}
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777",
			"size=" + strconv.FormatInt(spec.Limits.ShmBytes(), 10)}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		// The writable layer's /tmp, bound by mountRoot (see bindTmp).
		{Destination: "/tmp", Type: "bind", Source: filepath.Join(filepath.Dir(rootfs), "tmp"), Options: []string{"bind", "rw", "nosuid", "nodev"}},
	}
	for _, b := range spec.RootFS.Binds {
		mode := "ro"
		if b.Writable { // a volume
			mode = "rw"
		}
		mounts = append(mounts, specs.Mount{Destination: b.Target, Type: "bind", Source: b.Source,
			Options: []string{"rbind", mode, "nosuid", "nodev"}})
	}
	mounts = append(mounts,
		specs.Mount{Destination: inside.AgentPath, Type: "bind", Source: d.cfg.SandboxBinary, Options: []string{"bind", "ro", "nosuid", "nodev"}},
		specs.Mount{Destination: inside.OOMPath, Type: "bind", Source: oomFile, Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}})
	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			User: specs.User{UID: 0, GID: 0},
			Args: []string{inside.AgentPath},
			Env: []string{
				"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
				inside.EnvSandboxEnv + "=" + string(sandboxEnv),
				inside.EnvAgentSettings + "=" + string(agent),
				inside.EnvNoFDs + "=1",
				inside.EnvOOMFile + "=" + inside.OOMPath,
			},
			Cwd: "/",
			Capabilities: &specs.LinuxCapabilities{
				Bounding: keptCaps, Effective: keptCaps, Permitted: keptCaps,
			},
			NoNewPrivileges: true,
		},
		Root:     &specs.Root{Path: rootfs},
		Hostname: id,
		Mounts:   mounts,
		Linux: &specs.Linux{
			// The group the driver made, with the sandbox's limits (runsc
			// sizes its kernel by them); relative to runsc's own, the node's.
			CgroupsPath: d.cgroupName(id),
			Seccomp:     seccompProfile(),
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace, Path: netnsPath},
			},
		},
	}, nil
}

// writeBundle writes spec as dir/config.json.
func writeBundle(dir string, s *specs.Spec) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		return fmt.Errorf("write the sandbox's bundle: %w", err)
	}
	return nil
}

// readBundle reads dir/config.json.
func readBundle(dir string) (*specs.Spec, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	var s specs.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("the sandbox's bundle: %w", err)
	}
	return &s, nil
}

// setNetNS points a bundle's network namespace at path.
func setNetNS(s *specs.Spec, path string) {
	for i, ns := range s.Linux.Namespaces {
		if ns.Type == specs.NetworkNamespace {
			s.Linux.Namespaces[i].Path = path
		}
	}
}

// seccompProfile is the namespaces driver's deny list as an OCI profile,
// which runsc (with --oci-seccomp) enforces inside its own kernel, so the
// calls gVisor implements stay as closed to a sandbox as on Linux. Not
// clone3's ENOSYS (the namespaces driver's way to make libc fall back to
// clone, where flags can be checked): under runsc that rule left threads
// uncreatable; gVisor's own user namespaces are not the host's.
func seccompProfile() *specs.LinuxSeccomp {
	eperm := uint(unix.EPERM)
	newUser := []specs.LinuxSeccompArg{{Index: 0, Value: unix.CLONE_NEWUSER, ValueTwo: unix.CLONE_NEWUSER, Op: specs.OpMaskedEqual}}
	return &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: []specs.Arch{specs.ArchX86_64},
		Syscalls: []specs.LinuxSyscall{
			{Names: inside.DeniedSyscalls, Action: specs.ActErrno, ErrnoRet: &eperm},
			{Names: []string{"unshare", "clone"}, Action: specs.ActErrno, ErrnoRet: &eperm, Args: newUser},
		},
	}
}
